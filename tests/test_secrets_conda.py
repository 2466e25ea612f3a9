"""A conda channel behind an anaconda.org-style access token, for real: the local channel of
tests/condachannel.py served over loopback HTTP only under ``/t/<token>/`` (any other path is
403), locked with ``--channel http://127.0.0.1:PORT/t/<token>/chan``. The lock, every export made
from it, the bundle, ``lock --check``'s output and the run's logs hold the token nowhere; the lock
records the channel without it and installs with the token in ``RATTLER_AUTH_FILE`` alone (the
engine's own authentication). A lock holding a credential, or pointing a package outside its
channels, is refused by everything that reads it. Only the channel and the PyPI index are
stand-ins (no conda channel or PyPI at test time).
"""

from __future__ import annotations

import json
import os
import sys
import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from conftest import run_tool

from tfgpu.export import DIRECTORY_FORMATS, FORMATS

PY = f"{sys.version_info.major}.{sys.version_info.minor}"
TOKEN = "SECRETTOKEN123"


class _TokenChannel(SimpleHTTPRequestHandler):
    """The channel at ``/t/<TOKEN>/chan/`` only, always the whole file (rattler's conditional
    requests for absent shard indexes would otherwise get 304, which it does not take for absent)."""

    def parse_request(self):  # noqa: D102 - http.server's hook
        ok = super().parse_request()
        if ok:
            del self.headers["If-Modified-Since"]
        return ok

    def send_head(self):  # noqa: D102 - http.server's hook
        prefix = f"/t/{TOKEN}/chan/"
        if not self.path.startswith(prefix):
            self.send_error(403, "a token is needed")
            return None
        self.path = "/" + self.path[len(prefix) :]
        return super().send_head()

    def log_message(self, *args):  # noqa: D102 - quiet
        pass


@pytest.fixture(scope="module")
def served(lock_channel):
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), partial(_TokenChannel, directory=str(lock_channel)))
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def _env(root: Path, index: str, **extra: str) -> dict[str, str]:
    env = dict(
        os.environ,
        TFGPU_INDEX_URL=index,
        TFGPU_CACHE_DIR=str(root / "cache"),
        TFGPU_LOG_DIR=str(root / "logs"),
        HOME=str(root),
        TFGPU_INSECURE_HOSTS="127.0.0.1",  # the stand-in channel and index are plain HTTP on the loopback
        TFGPU_BUNDLE_TOOL="0",
    )
    env.pop("RATTLER_AUTH_FILE", None)
    env.update(extra)
    return env


def _auth_file(root: Path) -> str:
    path = root / "rattler-auth.json"
    path.write_text(json.dumps({"127.0.0.1": {"CondaToken": TOKEN}}))
    return str(path)


@pytest.fixture(scope="module")
def locked(tmp_path_factory, served, lock_index):
    """conda-lock.yml written from the token's URL, and what the run said and logged."""
    root = tmp_path_factory.mktemp("token-lock")
    out = root / "conda-lock.yml"
    argv = ["lock", "--tf", "2.13", "--mode", "conda", "--python", PY, "--no-detect", "--platform", "linux-64"]
    done = run_tool(*argv, "--channel", f"{served}/t/{TOKEN}/chan", "-o", str(out), env=_env(root, lock_index))
    assert done.returncode == 0, done.stdout + done.stderr
    return root, out, done


def _logs(root: Path) -> str:
    return "".join(p.read_text(errors="replace") for p in (root / "logs").rglob("*") if p.is_file())


def test_the_lock_records_the_channel_without_the_token_and_says_where_it_comes_from(locked, served):
    root, out, done = locked
    text = out.read_text()
    assert text.count(TOKEN) == 0 and (done.stdout + done.stderr).count(TOKEN) == 0
    assert _logs(root).count(TOKEN) == 0
    from tfgpu.lock.conda.read import read

    lock = read(out)
    assert lock.channels() == (f"{served}/chan",)
    assert all(str(p.url).startswith(f"{served}/chan/linux-64/") for p in lock.packages("linux-64", "conda"))
    assert f"# {served}/chan was given with a credential and is recorded without it" in text
    assert "RATTLER_AUTH_FILE" in text and "conda token set" in text


@pytest.mark.parametrize("fmt", FORMATS)
def test_no_export_from_the_lock_holds_the_token(tmp_path, locked, lock_index, fmt):
    _, lock, _ = locked
    out = tmp_path / ("out" if fmt in DIRECTORY_FORMATS else "out.file")
    done = run_tool("script", "--format", fmt, "--from-lock", str(lock), "-o", str(out), env=_env(tmp_path, lock_index))
    assert done.returncode == 0, done.stdout + done.stderr
    files = [p for p in ([out] if out.is_file() else out.rglob("*")) if p.is_file()]
    assert files and sum(p.read_text(errors="replace").count(TOKEN) for p in files) == 0
    assert (done.stdout + done.stderr + _logs(tmp_path)).count(TOKEN) == 0


def test_lock_check_reads_the_token_from_the_engines_auth_and_prints_none(tmp_path, locked, lock_index):
    _, lock, _ = locked
    without = run_tool("lock", "--check", str(lock), env=_env(tmp_path / "a", lock_index))
    assert without.returncode == 1 and "RATTLER_AUTH_FILE" in without.stderr  # 403 without its token: named
    assert (without.stdout + without.stderr + _logs(tmp_path / "a")).count(TOKEN) == 0
    env = _env(tmp_path / "b", lock_index, RATTLER_AUTH_FILE=_auth_file(tmp_path))
    done = run_tool("lock", "--check", str(lock), "--json", env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["current"] is True
    assert (done.stdout + done.stderr + _logs(tmp_path / "b")).count(TOKEN) == 0


def test_create_from_the_lock_installs_with_the_token_from_rattlers_auth_file(tmp_path, locked, lock_index):
    _, lock, _ = locked
    prefix = tmp_path / "env"
    refused = run_tool(
        "create",
        "--from-lock",
        str(lock),
        "--prefix",
        str(prefix),
        "--no-verify",
        "--yes",
        "--json",
        env=_env(tmp_path / "without", lock_index),
    )  # no credential anywhere: the channel answers 403, and nothing is built
    error = json.loads(refused.stdout)["error"]
    assert refused.returncode == 1 and error["code"] == "channel-unreachable"
    assert any("RATTLER_AUTH_FILE" in way for way in error["alternatives"])  # the way forward is named
    assert not prefix.exists() and (refused.stdout + refused.stderr).count(TOKEN) == 0
    env = _env(tmp_path, lock_index, RATTLER_AUTH_FILE=_auth_file(tmp_path))
    done = run_tool("create", "--from-lock", str(lock), "--prefix", str(prefix), "--no-verify", "--yes", env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (prefix / "conda-meta").is_dir() and any((prefix / "conda-meta").glob("cudnn-*.json"))
    everything = [p for p in prefix.rglob("*") if p.is_file() and not p.is_symlink() and p.stat().st_size < 1 << 20]
    assert sum(p.read_bytes().count(TOKEN.encode()) for p in everything) == 0
    assert (done.stdout + done.stderr + _logs(tmp_path)).count(TOKEN) == 0


def test_a_bundle_from_the_tokens_channel_holds_the_token_nowhere(tmp_path, served, lock_index):
    out = tmp_path / "bundle"
    argv = ["bundle", "--tf", "2.13", "--mode", "conda", "--python", PY, "--no-detect", "--platform", "linux-64"]
    done = run_tool(*argv, "--channel", f"{served}/t/{TOKEN}/chan", "-o", str(out), env=_env(tmp_path, lock_index))
    assert done.returncode == 0, done.stdout + done.stderr
    manifest = json.loads((out / "bundle.json").read_text())
    assert manifest["channels"] == [f"{served}/chan"]
    texts = [p.read_bytes() for p in out.rglob("*") if p.is_file()]
    assert sum(t.count(TOKEN.encode()) for t in texts) == 0
    assert (done.stdout + done.stderr + _logs(tmp_path)).count(TOKEN) == 0
    prefix = tmp_path / "env"  # and it installs from itself alone: no credential needed there
    env = _env(tmp_path / "target", lock_index, UV_OFFLINE="1")
    installed = run_tool("create", "--from-bundle", str(out), "--prefix", str(prefix), "--no-verify", "--yes", env=env)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    assert any((prefix / "conda-meta").glob("cudnn-*.json"))


def _resign(path: Path, edit) -> None:
    """A deliberate forgery: every entry edited and the lock's checksum recomputed."""
    from conda_lock.lockfile import parse_conda_lock_file, write_conda_lock_file

    from tfgpu.lock.conda.write import model_digest

    lockfile = parse_conda_lock_file(path)
    edit(lockfile)
    lockfile.metadata.custom_metadata["tfgpu_packages_sha256"] = model_digest(lockfile)
    write_conda_lock_file(lockfile, path, metadata_choices=set())


def _conda(lockfile):
    return next(p for p in lockfile.package if p.manager == "conda")


def _put_token(path: Path, served: str) -> None:
    """The token written back into every channel and package URL of the lock's text."""
    path.write_text(path.read_text().replace(f"{served}/chan", f"{served}/t/{TOKEN}/chan"))


def _elsewhere(url: str):
    def edit(lockfile):
        package = _conda(lockfile)
        package.url = url.format(name=package.url.rsplit("/", 1)[-1])

    return edit


@pytest.mark.parametrize(
    ("edit", "code"),
    [
        ("token", "secret-in-lock"),
        ("http://127.0.0.1:{port}/other/linux-64/{{name}}", "lock-url-outside-channel"),  # another path
        ("http://127.0.0.1:{port}/chan/linux-64/x/{{name}}", "lock-url-outside-channel"),  # below the subdir
        ("http://127.0.0.1:{port}/chan/osx-arm64/{{name}}", "lock-url-outside-channel"),  # another platform
        ("http://127.0.0.1:{port}/chanx/linux-64/{{name}}", "lock-url-outside-channel"),  # a prefix, not the dir
        ("http://127.0.0.1:1/chan/linux-64/{{name}}", "lock-url-outside-channel"),  # another port
        ("http://localhost:{port}/chan/linux-64/{{name}}", "lock-url-outside-channel"),  # another host name
    ],
)
def test_a_resigned_lock_is_refused_by_everything_that_reads_it(tmp_path, locked, served, lock_index, edit, code):
    """create --from-lock, script --from-lock and lock --check: exit 2 with the code, nothing made,
    and the token (where the forgery put one in) shown nowhere."""
    import shutil

    path = tmp_path / "conda-lock.yml"
    shutil.copy(locked[1], path)
    port = served.rsplit(":", 1)[1]
    if edit == "token":
        _put_token(path, served)
    _resign(path, (lambda lockfile: None) if edit == "token" else _elsewhere(edit.format(port=port)))
    # localhost named too: the other host is refused as outside the channels, not as plain HTTP.
    hosts = "127.0.0.1,localhost"
    env = _env(tmp_path, lock_index, RATTLER_AUTH_FILE=_auth_file(tmp_path), TFGPU_INSECURE_HOSTS=hosts)
    prefix, script = tmp_path / "env", tmp_path / "x.sh"
    for argv in (
        ["create", "--from-lock", str(path), "--prefix", str(prefix), "--no-verify", "--yes", "--json"],
        ["script", "--format", "bash", "--from-lock", str(path), "-o", str(script), "--json"],
        ["lock", "--check", str(path), "--json"],
    ):
        done = run_tool(*argv, env=env)
        assert done.returncode == 2, argv[0] + done.stdout + done.stderr
        assert json.loads(done.stdout)["error"]["code"] == code
        assert (done.stdout + done.stderr).count(TOKEN) == 0
    assert not prefix.exists() and not script.exists()
    assert _logs(tmp_path).count(TOKEN) == 0


def test_create_from_the_tokens_channel_keeps_no_token_in_its_own_records(tmp_path, served, lock_index):
    """``create --channel URL/t/<token>/chan`` installs with the token it was given; the env's marker
    and its record of the conda packages keep the channel without it, as a lock does. (conda-meta/
    is rattler's own record of what it linked, written by the engine.)"""
    prefix = tmp_path / "env"
    argv = ["create", "--tf", "2.13", "--mode", "conda", "--python", PY, "--no-detect", "--no-verify", "--yes"]
    env = _env(tmp_path, lock_index, UV_INDEX_URL=lock_index)
    done = run_tool(*argv, "--channel", f"{served}/t/{TOKEN}/chan", "--prefix", str(prefix), env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    records = prefix / "tfgpu" / "conda-records.json"
    marker = prefix / "tfgpu-env.json"
    assert records.read_text().count(TOKEN) == 0 and f"{served}/chan/linux-64/" in records.read_text()
    assert marker.read_text().count(TOKEN) == 0
    ours = [p for p in prefix.rglob("*") if p.is_file() and "conda-meta" not in p.parts and p.stat().st_size < 1 << 20]
    assert sum(p.read_bytes().count(TOKEN.encode()) for p in ours if not p.is_symlink()) == 0
    assert (done.stdout + done.stderr + _logs(tmp_path)).count(TOKEN) == 0
