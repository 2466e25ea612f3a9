"""``scripts/check_artefacts.py`` against a hostile registry and a lying index: a token realm that
points at a local file, another scheme or plain HTTP; tag lists and JSON documents of the wrong
shape; tags with control characters; an answer that trickles in. What the script writes
(tfgpu/data/artefacts.toml) must pass the data schema the plan loads it with, what it prints must
not carry a terminal's control sequences, and no answer may end it in a traceback or a hang. The
registry and the index are real servers on 127.0.0.1."""

from __future__ import annotations

import json
import threading
import time
import tomllib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import scriptmodule
from hangguard import hang_guard

from tfgpu.data import schema
from tfgpu.datasource import transport
from tfgpu.doors import urls
from tfgpu.doors.controls import has_control

TAG = "25.02-tf2-py3"


check_artefacts = scriptmodule.load("check_artefacts")


class Hostile(BaseHTTPRequestHandler):
    """A registry (``/v2/.../tags/list`` behind a challenge naming ``realm``) and an index
    (``/pypi/<name>/json``) that answer whatever the test sets."""

    realm = ""
    tags_body = b"{}"
    index_body = b"{}"
    drip = False
    authorizations: list[str] = []

    def do_GET(self):  # noqa: N802 - http.server's hook
        if self.path.startswith("/v2/"):
            if self.realm and not self.headers.get("Authorization"):
                self.send_response(401)
                self.send_header("WWW-Authenticate", f'Bearer realm="{self.realm}",service="registry"')
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            Hostile.authorizations.append(self.headers.get("Authorization", ""))
            return self._send(self.tags_body)
        if self.path.startswith("/token"):
            return self._send(b'{"token": "anonymous-pull"}')
        return self._send(self.index_body)

    def _send(self, body: bytes):
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not self.drip:
            self.wfile.write(body)
            return
        try:
            for byte in body * 1000:
                self.wfile.write(bytes([byte]))
                self.wfile.flush()
                time.sleep(0.05)
        except OSError:
            pass

    def log_message(self, *args):
        pass


@pytest.fixture
def server(monkeypatch):
    monkeypatch.setattr(Hostile, "authorizations", [])
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Hostile)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    previous = urls.trusted()
    urls.trust(["127.0.0.1"])
    yield f"127.0.0.1:{httpd.server_address[1]}"
    urls.trust(previous)
    httpd.shutdown()
    httpd.server_close()


def registry_row(server):
    return check_artefacts.check_registry(f"registry:{server}/nvidia/tensorflow:{TAG}", scheme="http")


def written_and_shown(rows):
    """The table the script writes, read back as the plan reads it, and every printed line checked."""
    text = check_artefacts.render(rows, "2026-01-01")
    schema.validate("artefacts.toml", tomllib.loads(text), "artefacts.toml")
    for row in rows:
        assert not has_control(check_artefacts.line(row)), check_artefacts.line(row)


def test_a_token_realm_naming_a_local_file_is_never_read_or_sent(server, tmp_path, monkeypatch):
    secret = tmp_path / "credentials.json"
    secret.write_text('{"token": "LOCAL-SECRET"}')
    # "#": the query the script appends becomes a fragment, and the file itself is read.
    monkeypatch.setattr(Hostile, "realm", secret.as_uri() + "#")
    row = registry_row(server)
    assert row["result"] == "unchecked" and "LOCAL-SECRET" not in json.dumps(row)
    assert not any("LOCAL-SECRET" in sent for sent in Hostile.authorizations)
    written_and_shown([row])


@pytest.mark.parametrize("realm", ["http://auth.example.com/token", "ftp://127.0.0.1/token", "https://u:p@127.0.0.1/t"])
def test_a_token_realm_the_url_door_refuses_is_unchecked(server, monkeypatch, realm):
    monkeypatch.setattr(Hostile, "realm", realm)
    row = registry_row(server)
    assert row["result"] == "unchecked" and "realm" in row["detail"]
    written_and_shown([row])


@pytest.mark.parametrize(
    "tags",
    [
        b"[]",
        b'"tags"',
        b'{"tags": "25.02-tf2-py3"}',
        b'{"tags": [1, null, {"a": 1}]}',
        b"not json at all",
        b'{"tags": ["' + b"9" * 5000 + b'-tf2-py3"]}',
    ],
)
def test_a_tag_list_of_the_wrong_shape_is_unchecked_or_read_without_a_traceback(server, monkeypatch, tags):
    monkeypatch.setattr(Hostile, "tags_body", tags)
    row = registry_row(server)
    assert row["result"] in ("unchecked", "missing")
    written_and_shown([row])


def test_tags_with_control_characters_reach_neither_the_table_nor_the_terminal(server, monkeypatch):
    tags = [TAG, "25.09\x1b]0;PWNED\x07-tf2-py3", "25.10\x7f-tf2-py3", "25.11\u202e-tf2-py3"]
    monkeypatch.setattr(Hostile, "tags_body", json.dumps({"tags": tags}).encode())
    row = registry_row(server)
    assert row["result"] == "exists" and "PWNED" not in row["detail"]
    written_and_shown([row])


@pytest.mark.parametrize(
    "document",
    [
        b"[]",
        b'{"releases": []}',
        b'{"releases": {"1.0": "not a list"}}',
        b'{"releases": {"1.0": [1, 2]}}',
        b'{"releases": {"1.0": [{}]}, "info": "text"}',
        b'{"releases": {"1.0": [{}]}, "info": {"provides_extra": 7}}',
    ],
)
def test_an_index_answer_of_the_wrong_shape_is_unchecked_without_a_traceback(server, monkeypatch, document):
    monkeypatch.setattr(Hostile, "index_body", document)
    row = check_artefacts.check_pypi("pypi:jax[cuda12]>=0.5", index=f"http://{server}/pypi")
    assert row["result"] in ("unchecked", "missing")
    written_and_shown([row])


def test_a_registry_that_trickles_its_answer_is_given_up_on(server, monkeypatch):
    monkeypatch.setattr(Hostile, "tags_body", json.dumps({"tags": [TAG] * 50}).encode())
    monkeypatch.setattr(Hostile, "drip", True)
    monkeypatch.setattr(check_artefacts, "TIMEOUT", 1.0)
    monkeypatch.setattr(transport, "sleep", lambda seconds: None)
    with hang_guard("a tag list that arrives a byte at a time"):
        row = registry_row(server)
    assert row["result"] == "unchecked"
    written_and_shown([row])
