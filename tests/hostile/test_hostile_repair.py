"""``repair`` against hostile or half-done state: a journal that is not ours, names an option or a
path outside the env, is truncated, huge or a link; a directory in the env that links out of it; a
repair SIGKILLed half way; two repairs at once. Each leaves everything outside the env unchanged,
changes nothing inside unless it completes, and exits with its documented code.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import builtenvs
import pytest
import repairhelpers as rh
from conftest import run_tool

from hostile.conftest import changed, snapshot

QUIET = ("--no-detect", "--yes", "--no-verify")


@pytest.fixture
def user_env(sandbox, repair_wheels, uv_cache, monkeypatch) -> Path:
    monkeypatch.setenv("TFGPU_CACHE_DIR", str(uv_cache))
    # Every uv here (the user's own `uv pip install`s and the tool's) uses a cache under tmp, never
    # the user's ~/.cache/uv: the same directory as the tool's own uv cache, so it is reused.
    monkeypatch.setenv("UV_CACHE_DIR", str(uv_cache / "uv"))
    return builtenvs.user_venv(sandbox / "env", repair_wheels, "tensorflow==2.21.0")


@pytest.fixture(scope="module")
def _repaired_once(tmp_path_factory, repair_wheels, uv_cache) -> tuple[Path, Path]:
    """A user env repaired for real, once for the module, and a copy of it as the repair left it.
    The journal names the env's path, so each test given it works on it where it was repaired,
    restored from the copy first (an untouched restored env repairs and undoes as the original)."""
    home = tmp_path_factory.mktemp("repaired")
    prefix, pristine = home / "env", home / "pristine"
    env = dict(os.environ, TFGPU_CACHE_DIR=str(uv_cache), UV_CACHE_DIR=str(uv_cache / "uv"))
    env.update(TFGPU_LOG_DIR=str(home / "logs"), TFGPU_ENVS_DIR=str(home / "envs"), COLUMNS="160")
    builtenvs.user_venv(prefix, repair_wheels, "tensorflow==2.21.0", env=env)
    done = run_tool(
        "repair", "--prefix", str(prefix), "--find-links", str(repair_wheels), "--offline", *QUIET, "--json", env=env
    )
    assert done.returncode == 0, done.stdout + done.stderr
    shutil.copytree(prefix, pristine, symlinks=True)
    return prefix, pristine


@pytest.fixture
def repaired_env(_repaired_once, sandbox) -> Path:
    """The env of ``_repaired_once`` as the repair left it, for a test that attacks its journal
    (repair itself is tests/test_repair.py's). It lives outside the sandbox: compare
    :func:`state`, which takes both in.

    Its files are hard links to the copy's, but for the journal, its own file: the journal is the
    one file these tests write in place (each write elsewhere, the tool's or a test's, makes a new
    file, and every test here asserts that the tool changed nothing). A copy of every file cost
    each test a tenth of a CPU-second of system time."""
    prefix, pristine = _repaired_once
    shutil.rmtree(prefix, ignore_errors=True)
    shutil.copytree(pristine, prefix, symlinks=True, copy_function=os.link)
    journal = prefix / "etc" / "tfgpu" / "repair.json"
    journal.unlink()
    shutil.copy2(pristine / "etc" / "tfgpu" / "repair.json", journal)
    return prefix


def state(sandbox: Path, env: Path) -> dict[str, tuple]:
    """The sandbox's snapshot and the env's (each path under ``env/``)."""
    return {**snapshot(sandbox), **{f"env/{path}": facts for path, facts in snapshot(env).items()}}


def journal_of(prefix: Path) -> dict:
    return json.loads((prefix / "etc" / "tfgpu" / "repair.json").read_text())


def write_journal(user_env: Path, journal: dict) -> None:
    (user_env / "etc" / "tfgpu" / "repair.json").write_text(json.dumps(journal))


@pytest.mark.parametrize(
    "tamper",
    [
        pytest.param(lambda j: j | {"prefix": "/somewhere/else"}, id="journal-of-another-env"),
        pytest.param(lambda j: j | {"tool": "conda"}, id="journal-of-another-tool"),
        pytest.param(
            lambda j: j | {"added": [{"name": "--index-url=http://127.0.0.1:9/", "version": "1"}]},
            id="package-name-is-an-option",
        ),
        pytest.param(
            lambda j: j | {"changed": [{"name": "nvidia-cudnn-cu12", "from": "9; touch PWNED", "to": "9"}]},
            id="version-is-a-command",
        ),
        pytest.param(lambda j: j | {"files": {"../outside.txt": None}}, id="file-outside-the-env"),
        pytest.param(lambda j: j | {"files": {"/etc/hostname": None}}, id="absolute-file"),
        pytest.param(lambda j: j | {"dirs": ["../.."]}, id="directory-outside-the-env"),
        pytest.param(
            lambda j: j | {"files": {"bin/x": {"kind": "file", "data": "", "mode": 0o4755}}}, id="setuid-mode"
        ),
        pytest.param(lambda j: j | {"before": ["not", "a", "mapping"]}, id="wrong-shape"),
        pytest.param(lambda j: j | {"manager": "apt"}, id="unknown-manager"),
        pytest.param(lambda j: {k: v for k, v in j.items() if k != "written"}, id="no-record-of-what-it-wrote"),
        pytest.param(lambda j: {k: v for k, v in j.items() if k != "intended"}, id="no-record-of-what-it-meant"),
        pytest.param(
            lambda j: j | {"added": [{"name": "tensorflow", "version": j["before"]["tensorflow"], "record": "0" * 64}]},
            id="added-what-was-there-before",
        ),
        pytest.param(
            lambda j: j | {"added": [{"name": "somepkg", "version": "1.0", "record": None}]},
            id="added-without-a-record-digest",
        ),
        pytest.param(lambda j: j | {"written": {"my-notes.txt": "0" * 64}}, id="written-without-a-state-before"),
    ],
)
def test_a_tampered_journal_is_refused_and_nothing_changes(cli, sandbox, repaired_env, repair_wheels, tamper):
    write_journal(repaired_env, tamper(journal_of(repaired_env)))
    before = state(sandbox, repaired_env)
    for argv in (("repair", "--undo"), ("repair", *QUIET, "--offline", "--find-links", str(repair_wheels))):
        done = cli(*argv, "--prefix", str(repaired_env), "--json")
        assert (done.code, done.error) == (3, "repair-journal-foreign"), done.out
    assert changed(before, state(sandbox, repaired_env), allowed=("logs", "cache")) == []


@pytest.mark.parametrize("damage", ["truncated", "huge", "symlink", "directory"])
def test_a_damaged_journal_is_refused_not_taken_for_no_repair(cli, sandbox, repaired_env, repair_wheels, damage):
    user_env = repaired_env
    path = user_env / "etc" / "tfgpu" / "repair.json"
    text = path.read_text()
    if damage == "truncated":
        path.write_text(text[: len(text) // 2])
    elif damage == "huge":
        with path.open("a") as handle:
            handle.truncate(17 << 20)  # sparse: no real disk used
    elif damage == "symlink":
        (sandbox / "elsewhere.json").write_text(text)
        path.unlink()
        path.symlink_to(sandbox / "elsewhere.json")
    else:
        path.unlink()
        path.mkdir()
    before = state(sandbox, user_env)
    done = cli("repair", "--prefix", str(user_env), *QUIET, "--offline", "--find-links", str(repair_wheels), "--json")
    assert (done.code, done.error) == (3, "repair-journal-foreign"), done.out
    assert changed(before, state(sandbox, user_env), allowed=("logs", "cache")) == []


def test_a_directory_linking_out_of_the_env_stops_the_repair_before_it_writes_there(
    cli, sandbox, user_env, repair_wheels
):
    outside = sandbox / "outside-etc"
    outside.mkdir()
    (user_env / "etc").symlink_to(outside)
    before = snapshot(sandbox)
    done = cli("repair", "--prefix", str(user_env), "--find-links", str(repair_wheels), "--offline", *QUIET, "--json")
    assert done.code == 3 and done.error == "repair-path-outside", done.out
    assert list(outside.iterdir()) == []
    assert changed(before, snapshot(sandbox), allowed=("logs", "cache")) == []


def test_a_symlinked_prefix_is_refused(cli, sandbox, user_env, repair_wheels):
    link = sandbox / "link-to-env"
    link.symlink_to(user_env)
    done = cli("repair", "--prefix", str(link), "--find-links", str(repair_wheels), "--offline", *QUIET, "--json")
    assert (done.code, done.error) == (3, "prefix-is-symlink")


def test_a_second_repair_of_the_same_env_at_once_is_turned_away(cli, user_env, repair_wheels):
    from tfgpu.envs import txn

    before = rh.snapshot(user_env)
    with txn.TargetLock(user_env):
        done = cli(
            "repair", "--prefix", str(user_env), "--find-links", str(repair_wheels), "--offline", *QUIET, "--json"
        )
    assert (done.code, done.error) == (1, "target-busy")
    assert rh.snapshot(user_env) == before


class SlowWheels(SimpleHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 - http.server's name
        if self.path.endswith(".whl"):
            time.sleep(2.0)
        super().do_GET()

    def log_message(self, *args):  # noqa: D102 - quiet
        pass


@pytest.mark.slow
def test_sigkill_half_way_through_a_repair_is_rolled_back_by_the_next_run(sandbox, user_env, repair_wheels, cli):
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(SlowWheels, directory=str(repair_wheels)))
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    before, frozen = rh.snapshot(user_env), rh.freeze(user_env)
    journal = user_env / "etc" / "tfgpu" / "repair.json"
    try:
        child = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tfgpu",
                "repair",
                "--prefix",
                str(user_env),
                *QUIET,
                "--find-links",
                f"http://127.0.0.1:{server.server_address[1]}/",
                "--json",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, "TFGPU_CACHE_DIR": str(sandbox / "cold"), "UV_NO_INDEX": "1"},
            start_new_session=True,
        )
        deadline = time.monotonic() + 60
        while not journal.exists() and time.monotonic() < deadline and child.poll() is None:
            time.sleep(0.05)
        time.sleep(1.0)  # uv is now fetching the (slow) wheels
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()
    finally:
        server.shutdown()
    assert json.loads(journal.read_text())["state"] == "applying"
    undone = cli("repair", "--undo", "--prefix", str(user_env), "--json")
    assert undone.code == 0, undone.out + undone.err
    assert rh.snapshot(user_env) == before and rh.freeze(user_env) == frozen


def test_a_journal_with_conda_forges_underscore_packages_is_ours():
    """conda-forge envs hold ``_libgcc_mutex`` and ``_openmp_mutex``: names, not options."""
    import os

    from tfgpu.repair.apply import FORMAT, check_journal

    prefix = Path("/tmp")
    journal = {
        "tool": "tfgpu-install",
        "format": FORMAT,
        "prefix": os.path.realpath(prefix),
        "files": {},
        "written": {},
        "intended": [],
        "added": [],
        "before": {},
        "manager": "conda",
        "conda_before": {"_libgcc_mutex": "0.1", "_openmp_mutex": "4.5"},
    }
    check_journal(prefix, journal)


def _slow_repair(sandbox, user_env, repair_wheels):
    """A repair child fetching its wheels from a slow server on 127.0.0.1; returns (child, server)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(SlowWheels, directory=str(repair_wheels)))
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    child = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tfgpu",
            "repair",
            "--prefix",
            str(user_env),
            *QUIET,
            "--find-links",
            f"http://127.0.0.1:{server.server_address[1]}/",
            "--json",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "TFGPU_CACHE_DIR": str(sandbox / "cold"), "UV_NO_INDEX": "1"},
        start_new_session=True,
    )
    journal = user_env / "etc" / "tfgpu" / "repair.json"
    deadline = time.monotonic() + 60
    while not journal.exists() and time.monotonic() < deadline and child.poll() is None:
        time.sleep(0.05)
    return child, server


@pytest.mark.slow
def test_sigkill_then_a_user_install_then_undo_keeps_the_users_package(sandbox, user_env, repair_wheels, cli):
    import wheelhouse

    frozen = rh.freeze(user_env)
    child, server = _slow_repair(sandbox, user_env, repair_wheels)
    try:
        time.sleep(1.0)
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()
    finally:
        server.shutdown()
    mine = sandbox / "mine"
    mine.mkdir()
    wheelhouse.wheel(mine, "somepkg", "1.0", {"somepkg/__init__.py": b"VALUE = 1\n"})
    subprocess.run(
        [
            rh.uv(),
            "pip",
            "install",
            "--quiet",
            "--python",
            str(user_env / "bin" / "python"),
            "--no-index",
            "--find-links",
            str(mine),
            "somepkg==1.0",
        ],
        check=True,
    )
    undone = cli("repair", "--undo", "--prefix", str(user_env), "--json")
    assert undone.code == 0, undone.out + undone.err
    assert rh.freeze(user_env) == "".join(sorted([*frozen.splitlines(True), "somepkg==1.0\n"]))
    assert not (user_env / "etc" / "tfgpu").exists()


@pytest.mark.slow
def test_a_remove_during_a_repair_is_turned_away_and_neither_corrupts_the_env(sandbox, user_env, repair_wheels, cli):
    before = rh.snapshot(user_env)
    child, server = _slow_repair(sandbox, user_env, repair_wheels)
    try:
        removed = cli("remove", "--prefix", str(user_env), "--json")
        out, err = child.communicate(timeout=180)
    finally:
        server.shutdown()
    assert (removed.code, removed.error) == (1, "target-busy"), removed.out
    assert child.returncode == 0, out + err.decode()
    undone = cli("repair", "--undo", "--prefix", str(user_env), "--json")
    assert undone.code == 0, undone.out
    assert rh.snapshot(user_env) == before


def test_undo_never_takes_out_what_the_repair_did_not_add(cli, sandbox, repaired_env):
    """A journal of this env with no ``written`` map, listing TensorFlow (there before the repair)
    as added with no RECORD digest and a user's file as absent before: refused as a whole, so
    neither the package nor the file goes."""
    user_env = repaired_env
    journal = journal_of(user_env)
    notes = user_env / "my-notes.txt"
    notes.write_text("the user's own file\n")
    journal.pop("written")
    journal["files"]["my-notes.txt"] = None
    journal["added"].append({"name": "tensorflow", "version": journal["before"]["tensorflow"], "record": None})
    write_journal(user_env, journal)
    before = state(sandbox, user_env)
    done = cli("repair", "--undo", "--prefix", str(user_env), "--json")
    assert (done.code, done.error) == (3, "repair-journal-foreign"), done.out
    assert "--forget-journal" in " ".join(json.loads(done.out)["error"]["alternatives"])
    assert changed(before, state(sandbox, user_env), allowed=("logs", "cache")) == []
    assert notes.exists() and list(next(user_env.glob("lib/python3*/site-packages")).glob("tensorflow-*.dist-info"))


def test_forgetting_a_journal_twice_in_one_second_keeps_both(cli, repaired_env, monkeypatch):
    """Both journals set aside in the same second are kept (the name's second is not unique)."""
    import tfgpu.repair.journal as journal_module

    monkeypatch.setattr(journal_module.time, "strftime", lambda fmt, *a: "20260101T000000")
    user_env = repaired_env
    journal = user_env / "etc" / "tfgpu" / "repair.json"
    for text in ("{ first damaged journal", "{ second damaged journal"):
        journal.write_text(text)
        done = cli("repair", "--undo", "--forget-journal", "--prefix", str(user_env), "--json")
        assert done.code == 0, done.out
    kept = sorted(p.read_text() for p in journal.parent.glob("repair.json.forgotten-*"))
    assert kept == ["{ first damaged journal", "{ second damaged journal"], kept
