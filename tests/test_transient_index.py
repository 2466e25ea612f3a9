"""An index that answers the resolve and then, a moment later, not the install: PyPI's CDN or a
mirror between two states ("no version of grpcio==1.85.4" for the grpcio==1.85.4 just chosen).
The install is tried once more; failing again, the error says that a later run may succeed.

A real uv against a real index on loopback (tests/localindex.py's pages), whose page of one
project leaves out the chosen version for the requests the test names, counted per page. The
server answers every request in full (no 304, ``Cache-Control: no-cache``), so uv asks each time.
"""

from __future__ import annotations

import threading
from functools import partial
from http.server import ThreadingHTTPServer
from pathlib import Path

import localindex
import pytest
from conftest import run_tool

TARGET = ("--tf", "2.21", "--mode", "pip", "--python", "3.11", "--no-verify")
FLAPPING, VERSION = "nvidia-cudnn-cu12", "9.28.0.42"
PIN = f"{FLAPPING}=={VERSION}"


class FlappingIndex:
    """``localindex.build_index``'s pages, with ``FLAPPING``'s page leaving out ``VERSION`` on the
    requests (1-based, of that page) in ``missing_on``."""

    def __init__(self, root: Path, missing_on: set[int]) -> None:
        self.requests = 0
        lock = threading.Lock()
        index = self

        class Handler(localindex._Quiet):
            def send_head(self):  # noqa: D102 - SimpleHTTPRequestHandler's hook
                if self.path.rstrip("/").endswith(f"/simple/{FLAPPING}"):
                    with lock:
                        index.requests += 1
                        number = index.requests
                    page = (root / "simple" / FLAPPING / "index.html").read_text()
                    if number in missing_on:
                        page = "<br>\n".join(line for line in page.split("<br>\n") if VERSION not in line)
                    body = page.encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "text/html")
                    self.send_header("Content-Length", str(len(body)))
                    self.send_header("Cache-Control", "no-cache")
                    self.end_headers()
                    self.wfile.write(body)
                    return None
                return super().send_head()

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), partial(Handler, directory=str(root)))
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/simple"

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def index_root(tmp_path, local_wheels) -> Path:
    return localindex.build_index(local_wheels, tmp_path / "index")


def create(tmp_path: Path, tool_env: dict, url: str) -> tuple:
    env = {**tool_env, "TFGPU_CACHE_DIR": str(tmp_path / "cache"), "UV_DEFAULT_INDEX": url}
    prefix = tmp_path / "env"
    return run_tool("create", *TARGET, "--prefix", str(prefix), env=env), prefix


def test_a_version_the_index_stops_offering_after_the_resolve_is_asked_for_once_more(tmp_path, index_root, tool_env):
    with FlappingIndex(index_root, missing_on={2}) as url:  # 1: the resolve; 2: the install; 3: once more
        done, prefix = create(tmp_path, tool_env, url)
    assert done.returncode == 0, done.stderr
    assert f"the index offered {PIN} to the resolve and not to the install: once more" in done.stderr
    assert (prefix / "bin" / "python").exists()
    assert PIN in (prefix / "tfgpu" / "requirements.txt").read_text()


def test_a_second_miss_says_a_later_run_may_succeed(tmp_path, index_root, tool_env):
    flapping = FlappingIndex(index_root, missing_on=set(range(2, 100)))
    with flapping as url:
        done, prefix = create(tmp_path, tool_env, url)
    asked = flapping.requests
    assert done.returncode == 1 and "error: install-failed" in done.stderr, done.stderr
    assert done.stderr.count(": once more") == 1  # once, not again and again
    assert asked == 3, asked  # the resolve, the install, once more
    assert f"This looks transient (the index offered {PIN} to the resolve and not to the install" in done.stderr
    assert "The same command again in a few minutes may succeed." in done.stderr
    assert not prefix.exists()


def test_a_version_missing_from_the_start_is_not_tried_again(tmp_path, index_root, tool_env):
    """The resolve itself finds no such version: nothing changed between two answers, so no retry."""
    with FlappingIndex(index_root, missing_on=set(range(1, 100))) as url:
        done, _ = create(tmp_path, tool_env, url)
    assert done.returncode != 0
    assert "once more" not in done.stderr and "looks transient" not in done.stderr


def test_the_reading_of_uvs_output():
    from tfgpu.engines.uv import looks_transient

    said = (
        "  × No solution found when resolving dependencies:\n"
        "  ╰─▶ Because there is no version of grpcio==1.85.4 and you require grpcio==1.85.4, we can conclude"
    )
    assert looks_transient(said, ["grpcio==1.85.4", "tensorflow==2.21.0"]) == (
        "the index offered grpcio==1.85.4 to the resolve and not to the install",
        ["grpcio"],
    )
    assert looks_transient(said, ["grpcio==1.85.3"]) is None  # not what the resolve chose
    assert looks_transient("error: Hash mismatch for `grpcio==1.85.4`", ["grpcio==1.85.4"]) is None
    broken = "error: Failed to fetch: `https://pypi.org/...`\n  Caused by: HTTP status server error (503 Service Unavailable)"
    assert looks_transient(broken, [])[0] == "the index answered the resolve and then failed the install"
    assert looks_transient("Connection reset by peer (os error 104)", []) is not None
