"""A local PyPI serving the recorded responses of tests/fixtures/pypi/ (scripts/record_fixture.py).

``GET /pypi/<project>/json`` answers from ``index/``; ranged ``GET /files/<wheel>`` from
``ranges.tar.xz``, answering 206 with exactly the bytes recorded. The data of a GPU kernels
library, which the recorder keeps only as the sparse image its fatbin parser read
(``fatbin.tar.xz``), is served as a deflate stream that inflates to that image: the recorded
header bytes at their offsets, zeros elsewhere, ending where the image does. Anything not
recorded gets 416, so a test fails if the code under test asks for a byte it did not need.
"""

from __future__ import annotations

import functools
import json
import re
import tarfile
import threading
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "pypi"
MIB = 1 << 20


def _segment(data: bytes, mode: int = zlib.Z_FULL_FLUSH) -> bytes:
    # Each segment is deflated on its own and ends byte-aligned without the final-block bit, so
    # segments concatenate into one stream; the last one (Z_FINISH) ends it.
    compressor = zlib.compressobj(1, zlib.DEFLATED, -15)
    return compressor.compress(data) + compressor.flush(mode)


_ZERO_MIB = _segment(bytes(MIB))


def deflate_image(pieces: list[tuple[int, bytes]], size: int) -> bytes:
    """A raw deflate stream of ``size`` bytes: ``pieces`` at their offsets, zeros elsewhere."""
    out, pos = [], 0
    # One compressor for the pieces: a full flush after each empties its window, so what follows it
    # (a run of zeros made elsewhere) never needs what came before.
    compressor = zlib.compressobj(1, zlib.DEFLATED, -15)

    def zeros(n: int) -> None:
        out.append(_ZERO_MIB * (n // MIB))
        rest, run = n % MIB, 1
        while rest:  # a run of each power of two in the rest, each deflated once per process
            if rest & run:
                out.append(_zero_run(run))
                rest ^= run
            run <<= 1

    for offset, data in sorted(pieces):
        zeros(offset - pos)
        out.append(compressor.compress(data) + compressor.flush(zlib.Z_FULL_FLUSH))
        pos = offset + len(data)
    zeros(size - pos)
    out.append(_segment(b"", zlib.Z_FINISH))
    return b"".join(out)


@functools.cache
def _zero_run(size: int) -> bytes:
    """The segment of ``size`` zeros (a power of two below a MiB): 15,000 gaps between a recorded
    image's pieces deflated one by one cost each process that serves the images a second of CPU."""
    return _segment(bytes(size))


def load_images() -> dict[str, dict]:
    """``{wheel: {"member", "data_start", "inflated_size", "found", "pieces": [(offset, bytes)]}}``."""
    images: dict[str, dict] = {}
    with tarfile.open(FIXTURE / "fatbin.tar.xz") as tar:
        for member in tar.getmembers():
            wheel, name = member.name.split("/")
            image = images.setdefault(wheel, {"pieces": []})
            data = tar.extractfile(member).read()
            if name == "scan.json":
                image.update(json.loads(data))
            else:
                image["pieces"].append((int(name), data))
    return images


class RecordedIndex(BaseHTTPRequestHandler):
    """The request handler; ``ranges``, ``members`` and ``index_dir`` are set by :func:`serve`."""

    ranges: dict[str, list[tuple[int, int, bytes]]] = {}
    members: dict[str, tuple[int, bytes]] = {}
    index_dir: Path = FIXTURE / "index"
    requests: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        self.requests.append(self.path)
        if match := re.fullmatch(r"/pypi/([^/]+)/json", self.path):
            path = self.index_dir / f"{match.group(1)}.json"
            if path.is_file():
                return self._send(200, path.read_bytes(), {"Content-Type": "application/json"})
        elif match := re.fullmatch(r"/files/([^/]+)", self.path):
            wanted = re.fullmatch(r"bytes=(\d+)-(\d+)", self.headers.get("Range", ""))
            if not wanted:
                return self._send(400, b"this test server only answers Range requests")
            start, end = int(wanted.group(1)), int(wanted.group(2))
            body = self._body(match.group(1), start, end)
            if body is None:
                return self._send(416, b"range not recorded")
            return self._send(206, body, {"Content-Range": f"bytes {start}-{end}/*"})
        self._send(404, b"")

    def _body(self, filename: str, start: int, end: int) -> bytes | None:
        for first, last, data in self.ranges.get(filename, []):
            if first <= start and end <= last:
                return data[start - first : end - first + 1]
        if filename in self.members:
            data_start, stream = self.members[filename]
            if start >= data_start:
                piece = stream[start - data_start : end - data_start + 1]
                return piece + bytes(end - start + 1 - len(piece))
        return None

    def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for key, value in {**(headers or {}), "Content-Length": str(len(body))}.items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


def serve(index_dir: Path | None = None):
    """Start the server (a context manager yielding the ``.../pypi`` root URL)."""
    ranges: dict[str, list[tuple[int, int, bytes]]] = {}
    with tarfile.open(FIXTURE / "ranges.tar.xz") as tar:
        for member in tar.getmembers():
            filename, span = member.name.split("/")
            start, end = map(int, span.split("-"))
            ranges.setdefault(filename, []).append((start, end, tar.extractfile(member).read()))
    members = {
        wheel: (image["data_start"], deflate_image(image["pieces"], image["inflated_size"]))
        for wheel, image in load_images().items()
    }
    handler = type(
        "Handler",
        (RecordedIndex,),
        {"ranges": ranges, "members": members, "index_dir": index_dir or FIXTURE / "index", "requests": []},
    )
    return _Running(handler)


class _Running:
    def __init__(self, handler) -> None:
        self.handler = handler

    def __enter__(self) -> str:
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self.handler)
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return f"http://127.0.0.1:{self.server.server_address[1]}/pypi"

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


def recorded_members(wheel: str, project: str = "tensorflow"):
    """``read_wheel_members`` of a recorded wheel, served from the recorded ranges only."""
    from tfgpu.datasource.remote_zip import read_wheel_members

    spans = []
    with tarfile.open(FIXTURE / "ranges.tar.xz") as tar:
        for member in tar.getmembers():
            name, span = member.name.split("/")
            if name == wheel:
                start, end = map(int, span.split("-"))
                spans.append((start, end, tar.extractfile(member).read()))
    document = json.loads((FIXTURE / "index" / f"{project}.json").read_text("utf-8"))
    size = next(f["size"] for files in document["releases"].values() for f in files if f["filename"] == wheel)

    def fetch(start: int, end: int) -> bytes:
        for first, last, data in spans:
            if first <= start and end <= last:
                return data[start - first : end - first + 1]
        raise AssertionError(f"{wheel}: bytes {start}-{end} were not recorded")

    return read_wheel_members(fetch, size)
