"""Turn a wheel URL into the bytes of named members, without downloading the wheel.

This module owns the remote side of ``scripts/regen_tf_data.py``:

* ``Fetcher``: JSON documents and byte ranges over HTTP, retried with exponential backoff on
  429, 5xx and connection errors, optionally cached on disk;
* the remote zip reader (APPNOTE.TXT 4.3): the end-of-central-directory record (zip64
  aware), the central directory read chunk by chunk, and the local headers of just the
  members wanted, through a ``fetch(start, end)`` callable. ``read_wheel_members`` returns a
  wheel's ``*.dist-info/METADATA`` and ``build_info.py``;
* ``RegenError``, the one error the regeneration scripts raise and catch, and ``log``.

Standard library only.
"""

from __future__ import annotations

import dataclasses
import hashlib
import http.client
import json
import os
import re
import struct
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import zlib
from pathlib import Path

USER_AGENT = "tfgpu-install/scripts/regen_tf_data.py (Python urllib)"

#: The members read_wheel_members reads: build_info.py (first match) and METADATA.
BUILD_INFO_MEMBERS = (
    "tensorflow/python/platform/build_info.py",
    "tensorflow_core/python/platform/build_info.py",  # TF 2.0 and 2.1
)
METADATA_MEMBER = re.compile(r"^[^/]+\.dist-info/METADATA$")


class RegenError(Exception):
    """A source did not look the way this script expects; the message says what was found."""


def log(message: str) -> None:
    """Progress goes to stderr; stdout stays empty."""
    print(message, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------------------
# HTTP, with retries and an optional on-disk cache


class Fetcher:
    """Fetches JSON documents and byte ranges, retrying transient failures.

    With ``cache_dir`` every JSON document and byte range is stored on disk and served from
    there on the next run. Wheel URLs are content-addressed, so cached ranges never go stale;
    pass ``refresh_json=True`` to re-read the (changing) JSON documents.
    """

    def __init__(self, cache_dir: Path | None = None, *, refresh_json: bool = False,
                 timeout: float = 60.0, retries: int = 5) -> None:
        self.cache_dir = cache_dir
        self.refresh_json = refresh_json
        self.timeout = timeout
        self.retries = retries
        self._stats_lock = threading.Lock()
        self.requests = 0
        self.bytes = 0

    def json(self, url: str) -> dict | None:
        """The JSON document at ``url``, or None when the server answers 404."""
        cached = self._cache_path("json", url, ".json")
        if cached and cached.exists() and not self.refresh_json:
            return json.loads(cached.read_text("utf-8"))
        body = self._request(url, None)
        document = None if body is None else json.loads(body)
        if cached:
            _write_atomic(cached, json.dumps(document).encode())
        return document

    def range(self, url: str, start: int, end: int) -> bytes:
        """Bytes ``start`` to ``end`` (inclusive) of the file at ``url``."""
        cached = self._cache_path("ranges", url, f"/{start}-{end}")
        if cached and cached.exists():
            return cached.read_bytes()
        data = self._request(url, (start, end))
        if data is None:
            raise RegenError(f"{url}: 404 Not Found")
        if cached:
            _write_atomic(cached, data)
        return data

    def _cache_path(self, kind: str, url: str, suffix: str) -> Path | None:
        if self.cache_dir is None:
            return None
        digest = hashlib.sha256(url.encode()).hexdigest()[:24]
        name = re.sub(r"[^A-Za-z0-9._-]", "_", urllib.parse.urlsplit(url).path.strip("/"))[-80:]
        return self.cache_dir / kind / f"{name}-{digest}{suffix}"

    def _request(self, url: str, byte_range: tuple[int, int] | None) -> bytes | None:
        headers = {"User-Agent": USER_AGENT, "Accept-Encoding": "identity"}
        if byte_range:
            headers["Range"] = "bytes={}-{}".format(*byte_range)
        for attempt in range(self.retries + 1):
            try:
                with urllib.request.urlopen(urllib.request.Request(url, headers=headers),
                                            timeout=self.timeout) as response:
                    if byte_range and response.status != 206:
                        # Never read on: that would download the whole wheel.
                        raise RegenError(f"{url}: asked for a byte range, got HTTP {response.status}")
                    content_range = response.headers.get("Content-Range", "")
                    if byte_range and not content_range.startswith("bytes {}-{}/".format(*byte_range)):
                        raise RegenError(f"{url}: asked for bytes {byte_range}, got {content_range!r}")
                    data = response.read()
                break
            except urllib.error.HTTPError as exc:
                if exc.code == 404:
                    return None
                if exc.code != 429 and exc.code < 500 or attempt == self.retries:
                    raise RegenError(f"{url}: HTTP {exc.code} {exc.reason}") from exc
                problem = f"HTTP {exc.code}"
            except (urllib.error.URLError, TimeoutError, ConnectionError,
                    http.client.HTTPException) as exc:
                if attempt == self.retries:
                    raise RegenError(f"{url}: {exc}") from exc
                problem = str(exc)
            delay = 2 ** attempt
            log(f"  retry in {delay}s ({problem}): {url}")
            time.sleep(delay)
        if byte_range and len(data) != byte_range[1] - byte_range[0] + 1:
            raise RegenError(f"{url}: asked for bytes {byte_range}, got {len(data)} bytes")
        with self._stats_lock:
            self.requests += 1
            self.bytes += len(data)
        return data


def _write_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


# --------------------------------------------------------------------------------------------
# Reading two members of a remote zip (APPNOTE.TXT 4.3) through a range callable

EOCD = b"PK\x05\x06"
ZIP64_LOCATOR = b"PK\x06\x07"
ZIP64_EOCD = b"PK\x06\x06"
CENTRAL_ENTRY = b"PK\x01\x02"
LOCAL_HEADER = b"PK\x03\x04"
TAIL_BYTES = 8 * 1024            # a wheel has no archive comment: the EOCD is the last 22 bytes
MAX_TAIL_BYTES = 22 + 0xFFFF + 20  # EOCD + longest comment + zip64 locator
CD_CHUNK = 512 * 1024             # read the central directory in chunks, stop once both found
LOCAL_SLACK = 1024                # room for the local header's extra field


@dataclasses.dataclass(frozen=True)
class ZipEntry:
    """A central-directory entry: where a member's local header is and how it is stored."""

    name: str
    method: int
    compressed_size: int
    header_offset: int


@dataclasses.dataclass(frozen=True)
class WheelMembers:
    """The two members this script reads from a wheel (None when absent)."""
    metadata: str | None
    build_info: str | None


def read_wheel_members(fetch, size: int) -> WheelMembers:
    """Read METADATA and build_info.py from a zip of ``size`` bytes.

    ``fetch(start, end)`` returns the bytes ``start`` .. ``end`` (inclusive) of the file.
    """
    cd_offset, cd_size = _locate_central_directory(fetch, size)
    found: dict[str, ZipEntry] = {}
    for entry in _central_directory(fetch, cd_offset, cd_size):
        if METADATA_MEMBER.match(entry.name):
            found.setdefault("metadata", entry)
        elif entry.name in BUILD_INFO_MEMBERS:
            found.setdefault("build_info", entry)
        if len(found) == 2:
            break
    text = {key: _read_member(fetch, size, entry).decode("utf-8") for key, entry in found.items()}
    return WheelMembers(text.get("metadata"), text.get("build_info"))


def _locate_central_directory(fetch, size: int) -> tuple[int, int]:
    for tail_len in (min(size, TAIL_BYTES), min(size, MAX_TAIL_BYTES)):
        tail_start = size - tail_len
        tail = fetch(tail_start, size - 1)
        at = tail.rfind(EOCD)
        if at >= 0:
            break
    else:
        raise RegenError("no end-of-central-directory record: not a zip file")
    cd_size, cd_offset = struct.unpack_from("<II", tail, at + 12)
    if at >= 20 and tail[at - 20:at - 16] == ZIP64_LOCATOR:
        (eocd64_offset,) = struct.unpack_from("<Q", tail, at - 20 + 8)
        if eocd64_offset >= tail_start:
            record = tail[eocd64_offset - tail_start:eocd64_offset - tail_start + 56]
        else:
            record = fetch(eocd64_offset, eocd64_offset + 55)
        if record[:4] != ZIP64_EOCD:
            raise RegenError("zip64 locator points at no zip64 end-of-central-directory record")
        cd_size, cd_offset = struct.unpack_from("<QQ", record, 40)
    if cd_offset + cd_size > size:
        raise RegenError(f"central directory {cd_offset}+{cd_size} lies past the end ({size})")
    return cd_offset, cd_size


def _central_directory(fetch, offset: int, size: int):
    """Yield the central directory's entries, fetching it chunk by chunk."""
    buf, pos, next_fetch, end = b"", 0, offset, offset + size
    while True:
        while len(buf) - pos >= 46:
            if buf[pos:pos + 4] != CENTRAL_ENTRY:
                raise RegenError("central directory entry without its signature")
            name_len, extra_len, comment_len = struct.unpack_from("<HHH", buf, pos + 28)
            total = 46 + name_len + extra_len + comment_len
            if len(buf) - pos < total:
                break
            yield _parse_central_entry(buf[pos:pos + total])
            pos += total
        if next_fetch >= end:
            return
        chunk_end = min(end, next_fetch + CD_CHUNK)
        buf = buf[pos:] + fetch(next_fetch, chunk_end - 1)
        pos, next_fetch = 0, chunk_end


def _parse_central_entry(raw: bytes) -> ZipEntry:
    (flags, method, csize, usize, name_len, extra_len,
     offset) = struct.unpack_from("<8xHH8xIIHH10xI", raw)
    name = raw[46:46 + name_len].decode("utf-8" if flags & 0x800 else "cp437")
    extra = raw[46 + name_len:46 + name_len + extra_len]
    while len(extra) >= 4:  # zip64 extended information (APPNOTE 4.5.3)
        tag, length = struct.unpack_from("<HH", extra)
        if tag == 0x0001:
            values = iter(struct.unpack_from(f"<{length // 8}Q", extra, 4))
            if usize == 0xFFFFFFFF:
                usize = next(values)
            if csize == 0xFFFFFFFF:
                csize = next(values)
            if offset == 0xFFFFFFFF:
                offset = next(values)
        extra = extra[4 + length:]
    return ZipEntry(name, method, csize, offset)


def _read_member(fetch, size: int, entry: ZipEntry) -> bytes:
    want = 30 + len(entry.name.encode()) + LOCAL_SLACK + entry.compressed_size
    raw = fetch(entry.header_offset, min(size, entry.header_offset + want) - 1)
    if raw[:4] != LOCAL_HEADER:
        raise RegenError(f"{entry.name}: no local file header at {entry.header_offset}")
    name_len, extra_len = struct.unpack_from("<HH", raw, 26)
    start = 30 + name_len + extra_len
    if start + entry.compressed_size > len(raw):
        raw += fetch(entry.header_offset + len(raw), entry.header_offset + start + entry.compressed_size - 1)
    data = raw[start:start + entry.compressed_size]
    if entry.method == 0:
        return data
    if entry.method == 8:
        return zlib.decompress(data, -15)
    raise RegenError(f"{entry.name}: unsupported compression method {entry.method}")
