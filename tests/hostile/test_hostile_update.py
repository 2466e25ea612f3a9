"""``update-data`` against a hostile index (a real HTTP server on 127.0.0.1): answers of the wrong
shape, a ``build_info.py`` that does not parse, a server that trickles one byte every two
seconds, wheel URLs that break the transport rule, and nothing new. Each ends with its
documented code and no traceback, within the run's deadline, with no overlay written and an
existing one left byte for byte as it was."""

from __future__ import annotations

import io
import json
import re
import threading
import time
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from .conftest import changed, snapshot

NEW = "2.99.0"
WHEEL = f"tensorflow-{NEW}-cp311-cp311-manylinux_2_17_x86_64.whl"


def wheel_bytes(build_info: str) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr(
            f"tensorflow-{NEW}.dist-info/METADATA", f"Metadata-Version: 2.1\nName: tensorflow\nVersion: {NEW}\n"
        )
        archive.writestr("tensorflow/python/platform/build_info.py", build_info)
    return buffer.getvalue()


def entry(**fields) -> dict:
    return {
        "filename": WHEEL,
        "url": f"/files/{WHEEL}",
        "size": 1000,
        "packagetype": "bdist_wheel",
        "upload_time_iso_8601": "2027-01-01T00:00:00Z",
        "requires_python": ">=3.10",
        **fields,
    }


class Index(BaseHTTPRequestHandler):
    """The project page is ``document`` (bytes); ``files`` are served with range requests;
    ``drip`` sends the answer one byte every two seconds (``"body"`` after the headers, or
    ``"head"`` from the status line on)."""

    document: bytes = b"{}"
    files: dict[str, bytes] = {}
    drip: str = ""
    requests: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        self.requests.append(self.path)
        if self.path.endswith("/tensorflow/json"):
            return self._send(200, self.document)
        name = self.path.rsplit("/", 1)[-1]
        if name in self.files:
            data = self.files[name]
            start, end = map(int, re.fullmatch(r"bytes=(\d+)-(\d+)", self.headers["Range"]).groups())
            end = min(end, len(data) - 1)
            return self._send(206, data[start : end + 1], {"Content-Range": f"bytes {start}-{end}/{len(data)}"})
        self._send(404, b"")

    def _send(self, status: int, body: bytes, headers: dict | None = None) -> None:
        head = (
            f"HTTP/1.1 {status} X\r\nContent-Length: {len(body)}\r\n"
            + "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
            + "\r\n"
        )
        raw = head.encode() + body
        if self.drip:
            start = 0 if self.drip == "head" else len(head)
            self.wfile.write(raw[:start])
            self.wfile.flush()
            try:
                for index in range(start, len(raw)):
                    self.wfile.write(raw[index : index + 1])
                    self.wfile.flush()
                    time.sleep(2)
            except OSError:
                pass
            return
        self.wfile.write(raw)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def index():
    Index.document, Index.files, Index.drip, Index.requests = b"{}", {}, "", []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Index)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/pypi"
    server.shutdown()
    server.server_close()


@pytest.fixture
def update(cli, sandbox):
    """``update(index_url)`` runs ``update-data --json`` with the sandbox's own data dir and a 3 s deadline,
    in this process (what it fetches, parses and writes is the subject, not the interpreter's start)."""
    data = sandbox / "data"

    def run(url: str, **env: str):
        return cli(
            "update-data",
            "--index",
            url,
            "--json",
            env={
                "TFGPU_USER_DATA_DIR": str(data),
                "TFGPU_UPDATE_TIMEOUT": "3",
                "TFGPU_CACHE_DIR": str(sandbox / "cache"),
                **env,
            },
        )

    return run


MALFORMED = {
    "releases-is-text": {"releases": "x"},
    "document-is-a-list": [1, 2, 3],
    "files-is-a-table": {"releases": {NEW: {"a": 1}}},
    "file-is-a-string": {"releases": {NEW: ["tensorflow.whl"]}},
    "size-is-text": {"releases": {NEW: [entry(size="big")]}},
    "filename-is-a-number": {"releases": {NEW: [entry(filename=7)]}},
    "url-is-missing": {"releases": {NEW: [entry(url=None)]}},
    "upload-time-is-a-table": {"releases": {NEW: [entry(upload_time_iso_8601={})]}},
}


@pytest.mark.parametrize("document", list(MALFORMED.values()), ids=list(MALFORMED))
def test_an_answer_of_the_wrong_shape_is_update_failed(update, index, sandbox, document):
    Index.document = json.dumps(document).encode()
    before = snapshot(sandbox)
    done = update(index)
    assert (done.code, done.error) == (1, "update-failed"), done.out + done.err
    assert not (sandbox / "data").exists()
    assert changed(before, snapshot(sandbox), allowed=("cache", "logs")) == []


@pytest.mark.parametrize("body", [b"{not json", b"[" * 100_000 + b"]" * 100_000, b"\xff\xfe"])
def test_an_answer_that_is_not_json_is_update_failed(update, index, sandbox, body):
    Index.document = body
    done = update(index)
    assert (done.code, done.error) == (1, "update-failed"), done.out + done.err
    assert not (sandbox / "data").exists()


@pytest.mark.parametrize("build_info", ["def (:\n", "x = 1\0\n", "(" * 200_000])
def test_a_build_info_that_does_not_parse_is_update_failed(update, index, sandbox, build_info):
    wheel = wheel_bytes(build_info)
    Index.files = {WHEEL: wheel}
    Index.document = json.dumps({"releases": {NEW: [entry(size=len(wheel))]}}).encode()
    done = update(index)
    assert (done.code, done.error) == (1, "update-failed"), done.out + done.err
    assert any(path.endswith(WHEEL) for path in Index.requests)  # it was read, then refused
    assert not (sandbox / "data").exists()


def test_build_info_is_parsed_never_run(update, index, sandbox):
    wheel = wheel_bytes("import os\nos.system('touch PWNED')\nbuild_info = {'is_cuda_build': __import__('os')}\n")
    Index.files = {WHEEL: wheel}
    Index.document = json.dumps({"releases": {NEW: [entry(size=len(wheel))]}}).encode()
    done = update(index)
    assert done.code in (0, 1) and not list(sandbox.rglob("PWNED"))


@pytest.mark.slow  # waits out a timeout or compares a large sample: the full run keeps it
@pytest.mark.parametrize("drip", ["body", "head"])
def test_a_trickling_server_ends_within_the_deadline(update, index, sandbox, drip):
    Index.document = json.dumps({"releases": {NEW: [entry()]}}).encode()
    Index.drip = drip
    # The answer alone would take 2 s a byte, many minutes: the run ending inside the child's
    # 60 s timeout (a hang guard) with the deadline's own message is the 3 s deadline at work.
    done = update(index)
    assert (done.code, done.error) == (1, "update-failed"), done.out + done.err
    assert "deadline" in json.loads(done.out)["error"]["message"]
    assert not (sandbox / "data").exists()


@pytest.mark.parametrize(
    ("url", "code"),
    [
        ("http://10.9.9.9/files/" + WHEEL, "insecure-url"),
        ("//10.9.9.9/files/" + WHEEL, "insecure-url"),
        ("http://10.9.9.9\\@127.0.0.1/files/" + WHEEL, "bad-url"),
        ("ftp://127.0.0.1/" + WHEEL, "bad-url"),
        ("file:///etc/passwd", "bad-url"),
    ],
)
def test_listed_wheel_urls_that_break_the_transport_rule_are_refused_before_any_fetch(
    update, index, sandbox, url, code
):
    Index.files = {WHEEL: wheel_bytes("build_info = {}\n")}
    Index.document = json.dumps({"releases": {NEW: [entry(url=url)]}}).encode()
    done = update(index)
    assert done.code == 2 and done.error == code, done.out + done.err
    assert "the index's file list" in json.loads(done.out)["error"]["message"]
    assert Index.requests == ["/pypi/tensorflow/json"]  # no wheel was asked for, here or anywhere
    assert not (sandbox / "data").exists()


def test_a_redirect_off_the_rule_is_refused(update, index, sandbox, monkeypatch):
    def redirect(self):
        self.requests.append(self.path)
        self.send_response(302)
        self.send_header("Location", "http://10.9.9.9/pypi/tensorflow/json")
        self.send_header("Content-Length", "0")
        self.end_headers()

    monkeypatch.setattr(Index, "do_GET", redirect)
    done = update(index)
    assert done.code == 2 and done.error == "insecure-url", done.out + done.err
    assert not (sandbox / "data").exists()


def test_nothing_new_writes_nothing_and_leaves_the_overlay_as_it_was(update, index, sandbox, tool):
    Index.document = json.dumps(
        {"releases": {"2.21.0": [entry(filename="tensorflow-2.21.0-cp311-cp311-manylinux_2_17_x86_64.whl")]}}
    ).encode()
    done = update(index)
    assert done.code == 0, done.out + done.err
    report = json.loads(done.out)
    assert report["new_releases"] == [] and report["overlay"] is None and "Up to date" in report["summary"]
    assert not (sandbox / "data").exists()  # nothing written, so every later plan still works

    data = sandbox / "data"
    data.mkdir()
    existing = data / "tensorflow-updates.toml"
    existing.write_bytes(b"# an earlier update's overlay, kept as it is\n")
    before = snapshot(sandbox)
    assert update(index).code == 0
    assert changed(before, snapshot(sandbox), allowed=("cache", "logs")) == []
    assert existing.read_bytes() == b"# an earlier update's overlay, kept as it is\n"

    existing.unlink()
    plan = tool(
        "plan",
        "--tf",
        "2.21",
        "--os",
        "linux",
        "--no-detect",
        "--json",
        env={"TFGPU_USER_DATA_DIR": str(data), "TFGPU_CACHE_DIR": str(sandbox / "cache")},
    )
    assert plan.code == 0, plan.out


def test_a_bad_deadline_setting_is_a_usage_error(update, index):
    done = update(index, TFGPU_UPDATE_TIMEOUT="soon")
    assert (done.code, done.error) == (2, "bad-option-value")


def test_a_row_the_loader_refuses_is_never_renamed_into_place(update, index, sandbox):
    """A release whose facts pass the row checks but not the table's schema (a CUDA version that is
    no version): the new overlay is read back with plan's loader first, so nothing replaces the old one."""
    wheel = wheel_bytes("build_info = {'is_cuda_build': True, 'cuda_version': '12.x', 'cudnn_version': '9'}\n")
    Index.files = {WHEEL: wheel}
    Index.document = json.dumps({"releases": {NEW: [entry(size=len(wheel))]}}).encode()
    data = sandbox / "data"
    data.mkdir()
    (data / "tensorflow-updates.toml").write_bytes(b"# kept\n")
    done = update(index)
    assert (done.code, done.error) == (1, "update-failed"), done.out + done.err
    assert "does not pass the checks every table passes" in json.loads(done.out)["error"]["message"]
    assert sorted(p.name for p in data.iterdir()) == ["tensorflow-updates.toml"]
    assert (data / "tensorflow-updates.toml").read_bytes() == b"# kept\n"
