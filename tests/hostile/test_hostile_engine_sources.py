"""Hostile sources for the engines and the tool's own clients: URLs that would reach uv, pip,
rattler or the tool's HTTP clients around the URL door (uv's config files and variables, pip's
variables under a lock, a plain-HTTP proxy, an engine following a redirect by itself), and the
door's own limits (a host label's length, a megabyte URL in a message).

Each case points the URL at a recording server on loopback that is NOT named with
``--insecure-host`` (the ``unnamed`` fixture), or at 127.0.0.2 while only 127.0.0.1 is named,
so no traffic leaves the machine. The door's rule says plain HTTP reaches only named hosts; a
request that arrives at the recorder is a fetch around the door.
"""

from __future__ import annotations

import sys
import threading
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tfgpu.doors import urls

from .conftest import changed, snapshot

PY = f"{sys.version_info.major}.{sys.version_info.minor}"
DRIVER = "535.104.05"


@pytest.fixture
def unnamed(monkeypatch, tmp_path):
    monkeypatch.delenv("TFGPU_INSECURE_HOSTS", raising=False)
    monkeypatch.setenv("TFGPU_USER_DATA_DIR", str(tmp_path / "user-data"))
    for name in (
        "UV_INDEX",
        "UV_INDEX_URL",
        "UV_EXTRA_INDEX_URL",
        "UV_DEFAULT_INDEX",
        "UV_FIND_LINKS",
        "HTTP_PROXY",
        "http_proxy",
        "HTTPS_PROXY",
        "https_proxy",
        "ALL_PROXY",
        "all_proxy",
        "NO_PROXY",
        "no_proxy",
    ):
        monkeypatch.delenv(name, raising=False)
    urls.trust(())


@contextmanager
def recorder(host: str = "127.0.0.1"):
    """A server that answers 404 to everything and records each request line."""
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            seen.append(self.requestline)
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_HEAD = do_GET

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer((host, 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://{host}:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


def _create(cli, sandbox, **kwargs):
    return cli(
        "create",
        "--tf",
        "2.21",
        "--mode",
        "pip",
        "--python",
        PY,
        "--driver",
        DRIVER,
        "--prefix",
        str(sandbox / "env"),
        "--no-verify",
        "--json",
        **kwargs,
    )


def test_uv_index_variable_is_not_a_way_around_the_door(cli, sandbox, unnamed):
    """UV_INDEX_URL=http://<host not named> is handed to uv untouched by an unlocked create:
    uv fetches over plain HTTP from a host the user never named (TFGPU_INDEX_URL, the tool's own
    variable, is refused with insecure-url for the same value)."""
    with recorder() as (url, seen):
        before = snapshot(sandbox)
        done = _create(cli, sandbox, env={"UV_INDEX_URL": url + "/simple"})
    assert seen == [], f"uv fetched {seen[:3]} over plain HTTP from a host not named (exit {done.code}, {done.error})"
    assert done.code == 2 and done.error == "insecure-url", done.out
    assert changed(before, snapshot(sandbox), allowed=("logs", "cache")) == []


def test_a_committed_uv_toml_is_not_a_way_around_the_door(cli, sandbox, unnamed):
    """A uv.toml in the working directory (committed to the project the user cloned, beside its
    tfgpu.toml) names a plain-HTTP index on 127.0.0.2 (not named): every uv command says
    --no-config, so uv never reads it. The index uv does use is a named recorder on 127.0.0.1
    (UV_DEFAULT_INDEX, through the door), which answers 404, so nothing leaves the machine and
    the install fails (exit 1) instead of reaching PyPI."""
    with recorder("127.0.0.2") as (url, seen), recorder("127.0.0.1") as (named, _):
        (sandbox / "uv.toml").write_text(f'[pip]\nindex-url = "{url}/simple"\n')
        before = snapshot(sandbox)
        done = cli(
            "create",
            "--tf",
            "2.21",
            "--mode",
            "pip",
            "--python",
            PY,
            "--driver",
            DRIVER,
            "--prefix",
            str(sandbox / "env"),
            "--no-verify",
            "--insecure-host",
            "127.0.0.1",
            "--json",
            env={"UV_DEFAULT_INDEX": named + "/simple"},
        )
    assert seen == [], f"uv fetched {seen[:3]} over plain HTTP from a host not named (exit {done.code}, {done.error})"
    assert done.code in (1, 2, 3), done.out
    assert changed(before, snapshot(sandbox), allowed=("logs", "cache")) == []


def test_a_plain_http_proxy_is_not_a_way_around_the_door(cli, sandbox, unnamed):
    """Only 127.0.0.1 is named; HTTP_PROXY=http://127.0.0.2:P (a host not named) makes the
    tool's own client send the plain-HTTP request, and take the answer, from the proxy: bytes the
    rule says come only from the named host come from another one, in clear text."""
    with recorder("127.0.0.1") as (index, direct), recorder("127.0.0.2") as (proxy, proxied):
        done = cli(
            "update-data",
            "--index",
            index + "/pypi",
            "--insecure-host",
            "127.0.0.1",
            "--json",
            env={"HTTP_PROXY": proxy, "http_proxy": proxy},
        )
    assert proxied == [], f"plain HTTP went through {proxy}, a host not named: {proxied[:3]} (exit {done.code})"
    assert done.code in (1, 2), done.out


@contextmanager
def redirector(target: str):
    """A server on 127.0.0.1 that answers every GET with a 302 to ``target`` + the path."""
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            seen.append(self.requestline)
            self.send_response(302)
            self.send_header("Location", target + self.path)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


def test_rattler_does_not_follow_a_channel_redirect_to_a_host_not_named(cli, sandbox, unnamed):
    """Only 127.0.0.1 is named; its channel redirects to http://127.0.0.2 (not named). rattler
    follows by itself and reads repodata (which carries the packages' checksums) over plain HTTP
    from the other host; with no lock yet, nothing binds those checksums ("bound by the hashes a
    lock records" does not hold for `lock` or an unlocked create)."""
    with recorder("127.0.0.2") as (other, reached), redirector(other) as (channel, _):
        before = snapshot(sandbox)
        done = cli(
            "lock",
            "--no-project",
            "--mode",
            "conda",
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
            "--channel",
            channel + "/ch",
            "--insecure-host",
            "127.0.0.1",
            "--json",
        )
    assert reached == [], f"rattler fetched {reached[:3]} from 127.0.0.2, a host not named (exit {done.code})"
    assert done.code in (1, 2), done.out
    assert changed(before, snapshot(sandbox), allowed=("logs", "cache")) == []


def test_uv_does_not_follow_a_find_links_redirect_to_a_host_not_named(cli, sandbox, unnamed):
    """The same through uv: a --find-links page on the named 127.0.0.1 redirects to 127.0.0.2
    (UV_INDEX_URL names the same loopback server, so that no request leaves the machine)."""
    with recorder("127.0.0.2") as (other, reached), redirector(other) as (links, _):
        before = snapshot(sandbox)
        done = cli(
            "create",
            "--no-project",
            "--mode",
            "pip",
            "--tf",
            "2.21",
            "--python",
            PY,
            "--driver",
            DRIVER,
            "--prefix",
            str(sandbox / "env"),
            "--no-verify",
            "--find-links",
            links + "/wheels/",
            "--insecure-host",
            "127.0.0.1",
            "--json",
            env={"UV_INDEX_URL": links + "/simple"},
        )
    assert reached == [], f"uv fetched {reached[:3]} from 127.0.0.2, a host not named (exit {done.code})"
    assert done.code in (1, 2, 3), done.out
    assert changed(before, snapshot(sandbox), allowed=("logs", "cache")) == []


def test_the_pip_engine_installs_a_lock_from_the_index_it_records(cli, sandbox, unnamed):
    """``--from-lock`` installs from the index the lock records (docs/locks-and-bundles.md); with ``--engine pip``
    the lock's index is never passed and PIP_INDEX_URL (kept by tfgpu.process.runner on purpose) sends
    pip over plain HTTP to a host not named."""
    from .test_hostile_bytes import _pip_lock

    with recorder("127.0.0.1") as (named, _), recorder("127.0.0.2") as (other, reached):
        lock = _pip_lock(sandbox, index=named + "/simple")
        before = snapshot(sandbox)
        done = cli(
            "create",
            "--no-project",
            "--from-lock",
            str(lock),
            "--engine",
            "pip",
            "--prefix",
            str(sandbox / "env"),
            "--no-verify",
            "--insecure-host",
            "127.0.0.1",
            "--json",
            env={"PIP_INDEX_URL": other + "/simple"},
        )
    assert reached == [], f"pip fetched {reached[:3]} from 127.0.0.2, a host not named (exit {done.code})"
    assert done.code in (1, 2, 3), done.out
    assert changed(before, snapshot(sandbox), allowed=("logs", "cache")) == []


def test_a_host_label_over_63_characters_is_bad_url(cli, sandbox, unnamed):
    """The door accepts a 64-character label; Python's socket layer refuses it (idna), so the run
    ends as update-failed (exit 1) claiming "the answer ... is not what a PyPI JSON API looks
    like", though nothing answered: a reader differential the door should refuse (bad-url, 2)."""
    done = cli("update-data", "--index", "https://" + "a" * 64 + ".invalid/pypi", "--json")
    assert (done.code, done.error) == (2, "bad-url"), done.out


def test_a_huge_project_channel_gives_a_short_error_naming_the_project_file(cli, sandbox, unnamed, monkeypatch):
    """A 1 MB plain-HTTP channel in a project file: insecure-url, but the message repeats the
    whole megabyte (bad-url cuts at 500 characters, insecure-url does not) and names --channel,
    which the user never gave, instead of the project file."""
    project = sandbox / "tfgpu.toml"
    project.write_text('mode = "conda"\nchannels = ["http://10.9.9.9/' + "a" * 1_000_000 + '"]\n')
    monkeypatch.setenv("TFGPU_PROJECT_FILE", str(project))
    done = cli(
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
    assert (done.code, done.error) == (2, "insecure-url"), done.out[:2000]
    assert len(done.out) < 20_000, f"the error is {len(done.out)} characters long"
    assert str(project) in done.out


def test_every_uv_command_the_tool_builds_says_no_config(tmp_path, unnamed):
    """uv's config files (a cloned project's uv.toml, the user's) are never read: each argv builder."""
    from tfgpu.engines import uv as uv_engine

    cache, req = tmp_path / "cache", tmp_path / "r.txt"
    built = [
        uv_engine.venv("uv", tmp_path / "env", "3.12", "env", offline=False, cache=cache),
        uv_engine.compile_hashed("uv", req, tmp_path / "o.txt", "python", cache=cache),
        uv_engine.install("uv", "python", req, cache=cache),
        uv_engine.uninstall("uv", "python", ["six"]),
        uv_engine.inventory("uv", "python", cache=cache),
        uv_engine.compile_for_target(
            "uv",
            req,
            tmp_path / "o.txt",
            python_version="3.12",
            python_platform="x86_64-manylinux_2_28",
            index="https://pypi.org/simple",
            cache=cache,
        ),
        uv_engine.build_wheel("uv", tmp_path, tmp_path / "out", index="https://pypi.org/simple", cache=cache),
    ]
    assert [argv[:3] for argv in built if argv.count("--no-config") != 1] == []


def test_index_variables_pass_the_door_and_plain_http_gets_no_proxy(unnamed):
    """One rule for children: each index variable uv or pip reads is checked and kept (an HTTPS
    mirror works, a local find-links directory stays), plain HTTP to a host not named is
    insecure-url, and no proxy is left for plain HTTP."""
    from tfgpu.errors import UsageError
    from tfgpu.process.runner import clean_environment

    env = clean_environment(
        {
            "UV_INDEX_URL": "https://Mirror.example/simple",
            "UV_INDEX": "corp=https://a.example/simple https://b.example/s",
            "UV_FIND_LINKS": "/opt/wheels,https://c.example/links",
            "PIP_EXTRA_INDEX_URL": "https://d.example/simple",
            "PIP_TRUSTED_HOST": "10.9.9.9",
            "PIP_PROXY": "http://10.9.9.9:3128",
            "PIP_CERT": "/etc/ca.pem",
            "HTTP_PROXY": "http://10.9.9.9:3128",
            "http_proxy": "http://10.9.9.9:3128",
            "ALL_PROXY": "http://p.example:1",
            "NO_PROXY": "localhost",
        }
    )
    assert env["UV_INDEX_URL"] == "https://mirror.example/simple"
    assert env["UV_INDEX"] == "corp=https://a.example/simple https://b.example/s"
    assert env["UV_FIND_LINKS"] == "/opt/wheels,https://c.example/links"
    assert env["PIP_CERT"] == "/etc/ca.pem" and env["NO_PROXY"] == "localhost"
    assert env["HTTPS_PROXY"] == "http://p.example:1"
    assert not {"PIP_TRUSTED_HOST", "PIP_PROXY", "HTTP_PROXY", "http_proxy", "ALL_PROXY"} & set(env)
    for name, value, code in (
        ("UV_EXTRA_INDEX_URL", "https://ok.example/s http://10.9.9.9/s", "insecure-url"),
        ("PIP_INDEX_URL", "http://10.9.9.9/simple", "insecure-url"),
        ("UV_FIND_LINKS", "https://a\\@10.9.9.9/", "bad-url"),
    ):
        with pytest.raises(UsageError) as caught:
            clean_environment({name: value})
        assert caught.value.code == code and name in caught.value.message
