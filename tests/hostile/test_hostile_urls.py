"""Hostile URLs, from every source, against the one URL door (``tfgpu/doors/urls.py``).

``http://10.9.9.9\\@127.0.0.1:9/ch`` is a URL to 127.0.0.1 for Python's ``urlsplit`` and to
10.9.9.9 for uv, rattler and requests: the door refuses it (``bad-url``) wherever it comes from,
before any connection (nothing listens on 10.9.9.9 here, and the cases return at once). Plain HTTP
reaches only hosts the user names (``--insecure-host``), loopback included (``insecure-url``).
Each case asserts the exit code and error code, no traceback (the in-process ``cli`` lets an
unexpected exception fail the test) and nothing changed outside what the tool built.
"""

from __future__ import annotations

import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from hangguard import hang_guard

from tfgpu.doors import urls
from tfgpu.errors import UsageError

from .conftest import changed, snapshot
from .test_hostile_bytes import _pip_lock

PY = f"{sys.version_info.major}.{sys.version_info.minor}"
DRIVER = "535.104.05"
SPLIT = "http://10.9.9.9\\@127.0.0.1:9/ch"
"""The URL two readers disagree on."""

MALFORMED = {
    "backslash": SPLIT,
    "backslash-https": "https://10.9.9.9\\@conda.anaconda.org/conda-forge",
    "userinfo": "https://user:secret@conda.anaconda.org/conda-forge",
    "user": "http://evil@127.0.0.1:9/ch",
    "tab": "https://conda.anaconda.org/conda\t-forge",
    "newline": "https://conda.anaconda.org/ch\n--index-url",
    "space": "https://conda.anaconda.org /ch",
    "control": "https://conda.anaconda.org/\x00ch",
    "empty-host": "http:///10.9.9.9/ch",
    "no-slashes": "http:10.9.9.9/ch",
    "percent-host": "http://%31%30.9.9.9/ch",
    "numeric-host": "http://2130706433/ch",
    "short-ipv4": "http://127.1/ch",
    "hex-ipv4": "http://0x7f.0.0.1/ch",
    "ipv6-zone": "http://[fe80::1%25eth0]/ch",
    "scheme": "ftp://mirror.example.org/ch",
    "bad-port": "https://conda.anaconda.org:99999/ch",
}


@pytest.fixture
def unnamed(monkeypatch, tmp_path):
    """No host named for plain HTTP, as on a user's machine (the suite names its loopback); the
    user data dir is the case's own (an update-data that gets through writes its overlay there)."""
    monkeypatch.delenv("TFGPU_INSECURE_HOSTS", raising=False)
    monkeypatch.setenv("TFGPU_USER_DATA_DIR", str(tmp_path / "user-data"))
    urls.trust(())


def without_reaching_out(run, *argv, **kwargs):
    """``run(*argv)``, holding that the tool refused before it reached out: no connection from this
    process to anything but loopback (the suite's own servers) and no child process started (the
    engines, uv and rattler's, reach the network only from a child). A hang guard catches the rest."""
    import socket
    import subprocess

    reached, started = [], []
    real_connect, real_connect_ex, real_popen = socket.socket.connect, socket.socket.connect_ex, subprocess.Popen

    def loopback(address) -> bool:
        host = address[0] if isinstance(address, tuple) else ""
        return host in ("localhost", "::1") or host.startswith("127.")

    def connect(self, address):
        if not loopback(address):
            reached.append(address)
        return real_connect(self, address)

    def connect_ex(self, address):
        if not loopback(address):
            reached.append(address)
        return real_connect_ex(self, address)

    class Popen(real_popen):  # a class, as subprocess.Popen is: a module first imported now may write Popen[bytes]
        def __init__(self, argv, *args, **kwargs):
            started.append(argv)
            super().__init__(argv, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(socket.socket, "connect", connect)
        patch.setattr(socket.socket, "connect_ex", connect_ex)
        patch.setattr(subprocess, "Popen", Popen)
        with hang_guard(" ".join(argv)):
            done = run(*argv, **kwargs)
    assert reached == [], f"the tool connected to {reached} before refusing"
    assert started == [], f"the tool started {started} before refusing"
    return done


@pytest.mark.parametrize("url", MALFORMED.values(), ids=MALFORMED.keys())
def test_the_door_refuses_what_engines_read_differently(url):
    urls.trust(["127.0.0.1"])
    with pytest.raises(UsageError) as caught:
        urls.checked(url, "--channel")
    assert caught.value.code == "bad-url" and "--channel" in caught.value.message


def test_the_door_hands_on_the_canonical_form():
    urls.trust(["127.0.0.1", "Mirror.LAN"])
    assert [
        urls.checked(u, "t")
        for u in (
            "HTTPS://Conda.Anaconda.ORG:443/conda-forge",
            "http://127.0.0.1:80/ch",
            "http://mirror.lan.:8080/simple/",
            "https://bücher.example/ä",
        )
    ] == [
        "https://conda.anaconda.org/conda-forge",
        "http://127.0.0.1/ch",
        "http://mirror.lan:8080/simple/",
        "https://xn--bcher-kva.example/%C3%A4",
    ]


@pytest.mark.parametrize("command", ["create", "lock", "bundle"])
def test_a_split_channel_is_bad_url_before_any_connection(cli, sandbox, command):
    before = snapshot(sandbox)
    target = {
        "create": ("--prefix", str(sandbox / "env"), "--no-verify"),
        "lock": ("-o", str(sandbox / "conda-lock.yml"), "--platform", "linux-64"),
        "bundle": ("-o", str(sandbox / "B"), "--platform", "linux-64"),
    }[command]
    done = without_reaching_out(
        cli,
        command,
        "--tf",
        "2.13",
        "--mode",
        "conda",
        "--python",
        PY,
        "--driver",
        DRIVER,
        "--channel",
        SPLIT,
        *target,
        "--json",
    )
    assert (done.code, done.error) == (2, "bad-url"), done.out
    assert "backslash" in done.out
    assert changed(before, snapshot(sandbox), allowed=("logs", "cache")) == []


def test_a_split_channel_in_the_project_file_is_bad_url(cli, sandbox, monkeypatch):
    project = sandbox / "tfgpu.toml"
    project.write_text(f'mode = "conda"\nchannels = [{SPLIT!r}]\n'.replace("'", '"').replace("\\", "\\\\"))
    monkeypatch.setenv("TFGPU_PROJECT_FILE", str(project))
    before = snapshot(sandbox)
    done = without_reaching_out(
        cli,
        "lock",
        "--tf",
        "2.13",
        "--python",
        PY,
        "--driver",
        DRIVER,
        "--platform",
        "linux-64",
        "-o",
        str(sandbox / "conda-lock.yml"),
        "--json",
    )
    assert (done.code, done.error) == (2, "bad-url"), done.out
    assert str(project) in done.out
    assert changed(before, snapshot(sandbox), allowed=("logs", "cache")) == []


@pytest.mark.parametrize("command", ["check", "create"])
def test_a_split_index_in_a_pip_lock_is_bad_url(cli, sandbox, command):
    lock = _pip_lock(sandbox, index=SPLIT)  # its checksum recomputed, as an attacker can
    before = snapshot(sandbox)
    argv = (
        ("lock", "--check", str(lock))
        if command == "check"
        else ("create", "--from-lock", str(lock), "--prefix", str(sandbox / "env"), "--no-verify")
    )
    done = without_reaching_out(cli, *argv, "--json")
    assert (done.code, done.error) == (2, "bad-url"), done.out
    assert changed(before, snapshot(sandbox), allowed=("logs", "cache")) == []


def test_the_index_variable_goes_through_the_door(cli, sandbox):
    before = snapshot(sandbox)
    done = without_reaching_out(
        cli,
        "bundle",
        "--tf",
        "2.21",
        "--mode",
        "pip",
        "--python",
        PY,
        "--platform",
        "linux-64",
        "-o",
        str(sandbox / "B"),
        "--json",
        env={"TFGPU_INDEX_URL": "http://10.9.9.9/simple"},
    )
    assert (done.code, done.error) == (2, "insecure-url"), done.out
    assert "TFGPU_INDEX_URL" in done.out and "10.9.9.9" in done.out
    assert changed(before, snapshot(sandbox), allowed=("logs", "cache")) == []


def test_an_overlay_download_url_goes_through_the_door(cli, sandbox, tmp_path, monkeypatch):
    from fakenvidia import _overlay_cuda_toml

    overlay = tmp_path / "overlay"
    overlay.mkdir()
    # One backslash in the URL: doubled for TOML, and doubled again for the helper's re.sub.
    (overlay / "cuda.toml").write_text(
        _overlay_cuda_toml("11.8.0", SPLIT.replace("\\", "\\" * 4) + "/cuda.run", "0" * 64)
    )
    monkeypatch.setenv("TFGPU_DATA_DIR", str(overlay))
    before = snapshot(sandbox)
    done = without_reaching_out(
        cli,
        "create",
        "--tf",
        "2.13",
        "--mode",
        "system",
        "--python",
        PY,
        "--driver",
        "999.99",
        "--prefix",
        str(sandbox / "env"),
        "--no-verify",
        "--json",
    )
    assert (done.code, done.error) == (2, "bad-url"), done.out
    assert "runfile" in done.out
    assert changed(before, snapshot(sandbox), allowed=("logs", "cache")) == []


# -- conda locks: the checksum binds the channels -------------------------------------------------


@pytest.fixture
def conda_lock(tmp_path, tmp_path_factory, lock_channel, lock_index, monkeypatch):
    """The real lock, made once a session and copied here (tests/madelocks.py): each case edits its own."""
    import madelocks

    path = madelocks.conda_lock(tmp_path_factory, tmp_path / "conda-lock.yml", lock_channel, lock_index)
    monkeypatch.setenv("TFGPU_INDEX_URL", lock_index)
    monkeypatch.setenv("TFGPU_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("TFGPU_LOG_DIR", str(tmp_path / "logs"))
    return path


@pytest.mark.parametrize("command", ["check", "create"])
def test_an_edited_conda_lock_channel_is_lock_modified(cli, sandbox, conda_lock, command):
    from conda_lock.lockfile import parse_conda_lock_file

    channel = str(parse_conda_lock_file(conda_lock).metadata.channels[0].url)
    conda_lock.write_text(conda_lock.read_text().replace(channel, "http://10.9.9.9/ch"))
    before = snapshot(sandbox)
    argv = (
        ("lock", "--check", str(conda_lock))
        if command == "check"
        else ("create", "--from-lock", str(conda_lock), "--prefix", str(sandbox / "env"), "--no-verify")
    )
    done = without_reaching_out(cli, *argv, "--json")
    assert (done.code, done.error) == (2, "lock-modified"), done.out
    assert changed(before, snapshot(sandbox), allowed=("logs", "cache")) == []


def test_a_conda_lock_channel_with_a_forged_checksum_still_meets_the_door(cli, sandbox, conda_lock):
    from conda_lock.lockfile import parse_conda_lock_file

    from tfgpu.lock.conda.write import model_digest

    lockfile = parse_conda_lock_file(conda_lock)
    channel, recorded = (
        str(lockfile.metadata.channels[0].url),
        lockfile.metadata.custom_metadata["tfgpu_packages_sha256"],
    )
    conda_lock.write_text(conda_lock.read_text().replace(channel, SPLIT))
    forged = model_digest(parse_conda_lock_file(conda_lock))  # anyone can recompute it
    conda_lock.write_text(conda_lock.read_text().replace(recorded, forged))
    done = without_reaching_out(cli, "lock", "--check", str(conda_lock), "--json")
    # Refused whichever door reads it first: the URL door (a backslash) or the secrets door (an '@'
    # before the host reads as user:password to a reader that ends the authority at '/').
    assert done.code == 2 and done.error in ("bad-url", "secret-in-lock"), done.out


def test_an_edited_conda_lock_platform_is_lock_modified(cli, sandbox, conda_lock):
    text = conda_lock.read_text()
    conda_lock.write_text(text.replace("platforms:\n  - linux-64", "platforms:\n  - linux-64\n  - osx-arm64", 1))
    assert conda_lock.read_text() != text
    done = without_reaching_out(cli, "lock", "--check", str(conda_lock), "--json")
    assert (done.code, done.error) == (2, "lock-modified"), done.out


# -- redirects and loopback ------------------------------------------------------------------------


class _Redirecting(BaseHTTPRequestHandler):
    target = "http://10.9.9.9/cuda.run"
    seen: list = []

    def do_GET(self):  # noqa: N802 - http.server hook
        self.seen.append(self.path)
        self.send_response(302)
        self.send_header("Location", self.target)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def redirecting():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Redirecting)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    _Redirecting.seen = []
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("target", ["http://10.9.9.9/cuda.run", "http://10.9.9.9\\@127.0.0.1/cuda.run"])
def test_the_downloader_refuses_a_redirect_naming_its_target(redirecting, tmp_path, target, monkeypatch):
    from tfgpu.engines import download

    monkeypatch.setattr(_Redirecting, "target", target)
    with pytest.raises(UsageError) as caught:
        download.fetch(f"{redirecting}/cuda.run", tmp_path / "cache", sha256="0" * 64, retries=0)
    assert caught.value.code in ("insecure-url", "bad-url")
    # The target is named, unless its '@' makes the secrets door mask what stands before it.
    assert "10.9.9.9" in caught.value.message or "***@127.0.0.1" in caught.value.message
    assert _Redirecting.seen == ["/cuda.run"]
    assert not list((tmp_path / "cache").iterdir())


def test_the_data_fetcher_refuses_a_redirect_naming_its_target(redirecting, tmp_path):
    from tfgpu.datasource.http import Fetcher

    with pytest.raises(UsageError) as caught:
        Fetcher(tmp_path / "cache", retries=0, timeout=5).json(f"{redirecting}/pypi/tensorflow/json")
    assert caught.value.code == "insecure-url" and "10.9.9.9" in caught.value.message
    assert _Redirecting.seen == ["/pypi/tensorflow/json"]


@pytest.fixture(scope="module")
def recorded_pypi():
    """The recorded PyPI of tests/pypifixture.py (its request handler), started once for the module,
    answering its project documents only: these cases end before any wheel's bytes are asked for
    (a request for them gets 416 and shows), and building the recorded wheel images cost more CPU
    than a case's own work. A case may point it at an index directory of its own."""
    import pypifixture

    handler = type(
        "Handler",
        (pypifixture.RecordedIndex,),
        {"ranges": {}, "members": {}, "index_dir": pypifixture.FIXTURE / "index", "requests": []},
    )
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    server.url = f"http://127.0.0.1:{server.server_address[1]}/pypi"
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def pypi(recorded_pypi):
    """The recorded PyPI, serving the recorded index unless the case points it elsewhere
    (``pypi.RequestHandlerClass.index_dir``); no wheel was asked for."""
    import pypifixture

    yield recorded_pypi
    handler = recorded_pypi.RequestHandlerClass
    handler.index_dir = pypifixture.FIXTURE / "index"
    assert not [path for path in handler.requests if path.startswith("/files/")], handler.requests


def test_update_data_refuses_wheel_urls_an_index_points_elsewhere(tmp_path, monkeypatch, cli, sandbox, pypi):
    """An index on loopback whose answer lists its wheels on plain HTTP elsewhere: refused before any fetch."""
    import json
    import shutil

    import pypifixture
    from test_update_data import SHIPPED, without

    shipped = tmp_path / "shipped"  # the data as it was before 2.22.0rc0, so the index has a new release
    shipped.mkdir()
    (shipped / "tensorflow.toml").write_text(without(SHIPPED, "2.22.0rc0"), "utf-8")
    monkeypatch.setenv("TFGPU_DATA_DIR", str(shipped))
    monkeypatch.setenv("TFGPU_USER_DATA_DIR", str(tmp_path / "data"))

    index = tmp_path / "index"
    shutil.copytree(pypifixture.FIXTURE / "index", index)
    document = json.loads((index / "tensorflow.json").read_text())
    for files in document["releases"].values():
        for entry in files:
            entry["url"] = "http://10.9.9.9/files/" + entry["filename"]
    (index / "tensorflow.json").write_text(json.dumps(document))
    pypi.RequestHandlerClass.index_dir = index
    done = without_reaching_out(cli, "update-data", "--index", pypi.url, "--json")
    assert (done.code, done.error) == (2, "insecure-url"), done.out
    assert "10.9.9.9" in done.out


def test_loopback_needs_naming_too(cli, sandbox, unnamed, pypi):
    refused = without_reaching_out(cli, "update-data", "--index", pypi.url, "--json")
    assert (refused.code, refused.error) == (2, "insecure-url"), refused.out
    assert "--insecure-host 127.0.0.1" in refused.out
    allowed = cli("update-data", "--index", pypi.url, "--insecure-host", "127.0.0.1", "--json")
    assert allowed.error != "insecure-url" and allowed.code in (0, 1), allowed.out


def test_hosts_named_in_the_environment_and_the_option_are_checked(cli, sandbox, unnamed):
    done = cli("update-data", "--index", "http://127.0.0.1:9/pypi", "--insecure-host", "10.9.9.9\\@x", "--json")
    assert (done.code, done.error) == (2, "bad-url"), done.out
    done = cli("update-data", "--index", "http://127.0.0.1:9/pypi", "--json", env={"TFGPU_INSECURE_HOSTS": "a b"})
    assert (done.code, done.error) == (2, "bad-url"), done.out


def test_a_project_file_names_its_mirror(cli, sandbox, monkeypatch, unnamed):
    from tfgpu.cli import inputs
    from tfgpu.cli.parser import build_parser

    project = sandbox / "tfgpu.toml"
    project.write_text('insecure-hosts = ["Mirror.LAN", "127.0.0.1"]\n')
    monkeypatch.setenv("TFGPU_PROJECT_FILE", str(project))
    inputs.trust(inputs.build(build_parser().parse_args(["plan", "--json"])))
    assert urls.trusted() == {"mirror.lan", "127.0.0.1"}
    project.write_text('insecure-hosts = ["10.9.9.9\\\\@x"]\n')
    with pytest.raises(UsageError) as caught:
        inputs.build(build_parser().parse_args(["plan", "--json"]))
    # A host is not a URL: the file's own code, naming the file and the key (URLs keep bad-url).
    assert caught.value.code == "bad-project-file" and "insecure-hosts" in caught.value.message
    assert str(project) in caught.value.message


@pytest.mark.parametrize(
    "edit",
    [
        ("https://pypi.org/simple", "https://evil.example/simple"),
        ('"platform":"linux-64"', '"platform":"linux-aarch64"'),
        ("a" * 64, "b" * 64),
    ],
    ids=["index", "platform", "hash"],
)
def test_a_pip_lock_binds_its_index_platform_and_hashes(cli, sandbox, edit):
    lock = _pip_lock(sandbox)
    text = lock.read_text()
    assert edit[0] in text
    lock.write_text(text.replace(edit[0], edit[1]))
    done = without_reaching_out(
        cli, "create", "--from-lock", str(lock), "--prefix", str(sandbox / "env"), "--no-verify", "--json"
    )
    assert (done.code, done.error) == (2, "lock-modified"), done.out
    assert not (sandbox / "env").exists()


def test_the_front_door_and_the_url_door_name_one_variable():
    """The front door reads TFGPU_INSECURE_HOSTS without importing the URL door (a plan names no URL);
    the URL door names the same variable in its advice."""
    from tfgpu.cli import inputs
    from tfgpu.doors import urls

    assert inputs.INSECURE_HOSTS == urls.ENVIRONMENT
