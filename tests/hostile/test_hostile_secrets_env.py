"""An env built straight from a channel given with its access token (``--channel
http://HOST/t/<token>/chan``, no lock) keeps the token nowhere in the env: rattler writes the URL it
downloaded from into every ``conda-meta`` record, and those records are read and copied by conda,
``conda list --explicit`` and people. The channel is tests/condachannel.py's real one, served over
loopback HTTP only under ``/t/<token>/``; the PyPI index is the local stand-in (tests/localindex.py).
"""

from __future__ import annotations

import sys
import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

import pytest

PY = f"{sys.version_info.major}.{sys.version_info.minor}"
TOKEN = "SECRETTOKEN77"


class _TokenChannel(SimpleHTTPRequestHandler):
    """The channel at ``/t/<TOKEN>/chan/`` only (403 elsewhere), always the whole file."""

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


@pytest.fixture
def served(lock_channel):
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), partial(_TokenChannel, directory=str(lock_channel)))
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_an_env_from_a_tokens_channel_records_no_token(cli, sandbox, served, lock_index, monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv"))
    monkeypatch.delenv("RATTLER_AUTH_FILE", raising=False)
    prefix = sandbox / "env"
    done = cli(
        "create", "--tf", "2.13", "--mode", "conda", "--python", PY, "--driver", "535.104",
        "--channel", f"{served}/t/{TOKEN}/chan", "--prefix", str(prefix), "--no-verify", "--yes",
        env={"TFGPU_INSECURE_HOSTS": "127.0.0.1", "UV_INDEX_URL": lock_index},
    )  # fmt: skip
    assert done.code == 0, done.out + done.err
    records = sorted((prefix / "conda-meta").glob("*.json"))
    assert any(p.name.startswith("cudnn-") for p in records)
    assert all(f"{served}/chan/linux-64/" in p.read_text() for p in records)  # where each came from, kept
    files = [p for p in sandbox.rglob("*") if p.is_file() and not p.is_symlink() and p.stat().st_size < 1 << 20]
    leaking = [
        str(p.relative_to(sandbox)) for p in files if TOKEN.encode() in p.read_bytes() and "cache" not in p.parts
    ]
    assert leaking == []
    assert TOKEN not in done.out + done.err
