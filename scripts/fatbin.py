"""Which GPU code a TensorFlow wheel carries, read from the fatbins inside its kernels library.

TF 2.0-2.2 record no compute capabilities in build_info.py, and from 2.22 on cuda_config.h lists
them as bare numbers; the fatbins embedded in the GPU kernels library say exactly which SASS
(``sm_XY``) and PTX (``compute_XY``) each kernel carries [WHL-FATBIN]. A fatbin is a 16-byte
header (magic 0xBA55ED50, version 1, header size 16, payload size) followed by entries, each with
its own header: kind (1 = PTX, 2 = ELF/SASS), header size, payload size, the PTX/ELF version and
the target architecture. Only those headers are read; payloads are skipped.

The library is a deflated zip member, so it is streamed: bounded range reads (``CHUNK`` bytes,
aligned to absolute file offsets so that the range cache is hit on every re-run), inflated in
order, scanned. The result and every header byte the parser read (``image``: a sparse copy of the
inflated member, enough for the parser to give the same answer) are kept under
``<cache>/fatbin/``, so a re-run fetches nothing and ``record_fixture.py`` can store the image.

Standard library plus ``tfgpu.datasource``.
"""

from __future__ import annotations

import bisect
import json
import re
import struct
import zlib
from pathlib import Path

from tfgpu.datasource.http import SourceError, write_atomic
from tfgpu.datasource.releases import ArchScan, WheelFile
from tfgpu.datasource.remote_zip import ZipEntry, member_span

MAGIC = b"\x50\xed\x55\xba"
CHUNK = 8 * 1024 * 1024
INFLATE_STEP = 512 * 1024
"""Bytes inflated at a step. Small enough that the allocator reuses the memory of the step before:
16 MiB steps had each step's buffers mapped afresh, page-faulting twice the library's size (a
second of system time per GB scanned, five times the inflating itself)."""
MAX_FATBIN = 1 << 32  # a blob's declared size beyond this is not a fatbin header
LIBRARY = re.compile(r"\.(?:so(?:\.\d+)*|pyd|dll)$")
PTX, ELF = 1, 2


class InflatingReader:
    """A forward-only reader over a deflated byte stream that arrives in chunks."""

    def __init__(self, chunks) -> None:
        self._chunks = iter(chunks)
        self._inflater = zlib.decompressobj(-15)
        self._pending = b""
        self._buf = bytearray()
        self._base = 0  # absolute offset of _buf[0]
        self.pos = 0
        self.done = False

    def _pull(self) -> bool:
        """Inflate at most INFLATE_STEP more bytes (a highly compressed chunk must not explode)."""
        if self.done:
            return False
        if not self._pending:
            try:
                self._pending = next(self._chunks)
            except StopIteration:
                self.done = True
                return False
        try:
            self._buf += self._inflater.decompress(self._pending, INFLATE_STEP)
        except zlib.error as exc:
            raise SourceError(f"corrupt deflate stream ({exc})") from None
        self._pending = self._inflater.unconsumed_tail
        if self._inflater.eof:
            self.done = True
        return True

    def _drop_before(self, offset: int) -> None:
        cut = min(len(self._buf), max(0, offset - self._base))
        del self._buf[:cut]
        self._base += cut

    def find(self, needle: bytes) -> int | None:
        """Move to the next occurrence of ``needle`` at or after the position; None at the end."""
        while True:
            at = self._buf.find(needle, max(0, self.pos - self._base))
            if at >= 0:
                self.pos = self._base + at
                return self.pos
            self._drop_before(self._base + len(self._buf) - len(needle) + 1)
            self.pos = max(self.pos, self._base)
            if not self._pull():
                return None

    def read(self, n: int) -> bytes:
        """``n`` bytes at the position (fewer only at the end of the stream)."""
        while self._base + len(self._buf) < self.pos + n and self._pull():
            pass
        start = self.pos - self._base
        data = bytes(self._buf[start : start + n])
        self.pos += len(data)
        return data

    def seek(self, offset: int) -> None:
        """Go back (within what is still buffered) or forward."""
        if offset < self._base:
            raise SourceError("cannot seek back past the buffered part of the stream")
        self.pos = offset
        while self._base + len(self._buf) < self.pos and self._pull():
            self._drop_before(self.pos)


class RecordingReader:
    """Wraps a reader and keeps every byte read through it: the sparse image of the stream."""

    def __init__(self, reader) -> None:
        self.reader = reader
        self.image: list[tuple[int, bytes]] = []

    def find(self, needle: bytes) -> int | None:
        """As the wrapped reader's; a search reads nothing the parser keeps."""
        return self.reader.find(needle)

    def read(self, n: int) -> bytes:
        """As the wrapped reader's, keeping the bytes and where they were."""
        at = self.reader.pos
        data = self.reader.read(n)
        self.image.append((at, data))
        return data

    def seek(self, offset: int) -> None:
        self.reader.seek(offset)

    @property
    def pos(self) -> int:
        return self.reader.pos


def scan(reader) -> dict:
    """Parse every fatbin in the stream; returns archs seen per kind, PTX versions and blob count."""
    sass, ptx, ptx_versions, blobs = set(), set(), set(), 0
    while (at := reader.find(MAGIC)) is not None:
        head = reader.read(16)
        if len(head) < 16:
            break
        _, version, header_size, size = struct.unpack("<IHHQ", head)
        if version != 1 or header_size != 16 or not 0 < size < MAX_FATBIN:
            reader.seek(at + 1)
            continue
        blobs += 1
        end = at + 16 + size
        cursor = at + 16
        while cursor + 64 <= end:
            reader.seek(cursor)
            entry = reader.read(64)
            if len(entry) < 64:
                break
            kind, _, entry_header, payload = struct.unpack_from("<HHIQ", entry)
            minor, major, arch = struct.unpack_from("<HHI", entry, 24)
            if entry_header < 64 or cursor + entry_header + payload > end:
                break  # not an entry header: the rest of this blob is skipped
            if kind == ELF:
                sass.add(arch)
            elif kind == PTX:
                ptx.add(arch)
                ptx_versions.add((major, minor))
            cursor += entry_header + payload
        reader.seek(end)
    return {
        "sass": sorted(sass),
        "ptx": sorted(ptx),
        "ptx_versions": [list(v) for v in sorted(ptx_versions)],
        "blobs": blobs,
    }


def tf_notation(found: dict) -> tuple[str, ...]:
    """TensorFlow's build_info notation: ``compute_XY`` where PTX for XY is embedded, else ``sm_XY``."""
    archs = sorted(set(found["sass"]) | set(found["ptx"]))
    return tuple(f"{'compute' if a in found['ptx'] else 'sm'}_{a}" for a in archs)


def kernels_library(entries: tuple[ZipEntry, ...]) -> ZipEntry | None:
    """The GPU kernels library of a wheel: its largest shared library."""
    libraries = [e for e in entries if LIBRARY.search(e.name)]
    return max(libraries, key=lambda e: (e.compressed_size, e.name)) if libraries else None


class FatbinScanner:
    """The ``arch_scanner`` for ``ReleaseReader``: streams a GPU wheel's kernels library once and
    caches what it found (and the header image) under ``<cache>/fatbin/``."""

    def __init__(self, fetcher, cache_dir: Path | None, log=lambda message: None, bulk_fetcher=None) -> None:
        self.fetcher = fetcher
        self.bulk_fetcher = bulk_fetcher or fetcher  # the member's data chunks (record_fixture.py keeps them apart)
        self.cache_dir = cache_dir
        self.log = log
        self.scanned: dict[str, dict] = {}  # wheel file name -> the cache document

    def cache_file(self, wheel: WheelFile) -> Path | None:
        """Where the scan of ``wheel`` is cached (None without a cache dir)."""
        return self.cache_dir / "fatbin" / f"{wheel.filename}.json" if self.cache_dir else None

    def __call__(self, wheel: WheelFile, entries: tuple[ZipEntry, ...]) -> ArchScan | None:
        member = kernels_library(entries)
        if member is None:
            return None
        span = member_span(lambda a, b: self.fetcher.range(wheel.url, a, b), member)
        cached = self.cache_file(wheel)
        if cached and cached.is_file():
            result = json.loads(cached.read_text("utf-8"))
        else:
            self.log(
                f"  scanning the fatbins of {wheel.filename}:{member.name} "
                f"({member.compressed_size / 1e6:.0f} MB compressed)"
            )
            result = self.scan_member(wheel, member, span)
            if cached:
                write_atomic(cached, json.dumps(result).encode())
        self.scanned[wheel.filename] = dict(result, data_start=span[0])
        if not result["found"]["sass"] and not result["found"]["ptx"]:
            return None
        versions = result["found"]["ptx_versions"]
        isa = "{}.{}".format(*max(versions)) if versions else ""
        return ArchScan(tf_notation(result["found"]), isa, result["member"])

    def scan_member(self, wheel: WheelFile, member: ZipEntry, span: tuple[int, int]) -> dict:
        """Stream and scan one member; returns the cache document (result + header image)."""
        start, end = span
        chunks = (
            self.bulk_fetcher.range(wheel.url, max(start, k * CHUNK), min(end, (k + 1) * CHUNK) - 1)
            for k in range(start // CHUNK, (end - 1) // CHUNK + 1)
        )
        reader = RecordingReader(InflatingReader(chunks))
        found = scan(reader)
        return {
            "member": member.name,
            "data_start": start,
            "inflated_size": member.size,
            "found": found,
            "image": [[offset, data.hex()] for offset, data in merge_image(reader.image)],
        }


def merge_image(image: list[tuple[int, bytes]]) -> list[tuple[int, bytes]]:
    """Sorted, overlapping and adjacent pieces joined."""
    merged: list[tuple[int, bytearray]] = []
    for offset, data in sorted(image):
        if merged and offset <= merged[-1][0] + len(merged[-1][1]):
            last_offset, last = merged[-1]
            overlap = last_offset + len(last) - offset
            last += data[overlap:] if overlap < len(data) else b""
        else:
            merged.append((offset, bytearray(data)))
    return [(offset, bytes(data)) for offset, data in merged]


class ImageReader:
    """A reader over a recorded sparse image: only the bytes ``scan`` read are there, and asking for
    any other byte is an error (which is how the tests show the image is all the parser needs)."""

    def __init__(self, image: list[tuple[int, bytes]], size: int) -> None:
        self.image = merge_image(image)
        self.offsets = [offset for offset, _ in self.image]
        self.size = size
        self.pos = 0

    def _piece(self, at: int) -> int:
        """Index of the last piece starting at or before ``at`` (-1 if none)."""
        return bisect.bisect_right(self.offsets, at) - 1

    def find(self, needle: bytes) -> int | None:
        for i in range(max(0, self._piece(self.pos)), len(self.image)):
            offset, data = self.image[i]
            at = data.find(needle, max(0, self.pos - offset))
            if at >= 0:
                self.pos = offset + at
                return self.pos
        return None

    def read(self, n: int) -> bytes:
        i = self._piece(self.pos)
        if i >= 0:
            offset, data = self.image[i]
            if self.pos + n <= offset + len(data):
                piece = data[self.pos - offset : self.pos - offset + n]
                self.pos += n
                return piece
        raise SourceError(f"bytes {self.pos}..{self.pos + n} were not recorded")

    def seek(self, offset: int) -> None:
        self.pos = offset


def read_release(
    version: str, fetcher, index_url: str = "https://pypi.org/pypi", cache_dir: Path | None = None, log=lambda m: None
) -> dict:
    """The SASS, PTX and PTX ISA of ``tensorflow==version``'s Linux x86_64 wheel, read from its fatbins
    (what ``scripts/regen_arch_support.py`` records for releases whose build_info already lists
    their architectures, so the tensorflow.toml row carries no PTX ISA)."""
    from tfgpu.datasource.releases import Index, best_wheel
    from tfgpu.datasource.remote_zip import central_directory

    index = Index(fetcher, index_url)
    wheels = index.wheels("tensorflow", version).get("linux_x86_64")
    if not wheels:
        raise SourceError(f"tensorflow {version}: no linux_x86_64 wheel on {index_url}")
    wheel = best_wheel(wheels)
    entries = tuple(central_directory(lambda a, b: fetcher.range(wheel.url, a, b), wheel.size))
    scanner = FatbinScanner(fetcher, cache_dir, log)
    scan_result = scanner(wheel, entries)
    found = scanner.scanned[wheel.filename]["found"]
    return {
        "tensorflow": version,
        "wheel": wheel.filename,
        "member": scanner.scanned[wheel.filename]["member"],
        "compute_capabilities": list(scan_result.compute_capabilities) if scan_result else [],
        "ptx_isa": scan_result.ptx_isa if scan_result else "",
        "ptx_versions": ["{}.{}".format(*v) for v in found["ptx_versions"]],
    }


def main(argv=None) -> int:
    """``python scripts/fatbin.py --cache DIR 2.21.0 2.13.1``: one JSON line per release."""
    import argparse
    import sys

    from tfgpu.datasource.http import Fetcher

    parser = argparse.ArgumentParser(description="Read the SASS/PTX of TensorFlow wheels from their fatbins.")
    parser.add_argument("versions", nargs="+")
    parser.add_argument("--cache", type=Path, help="directory caching byte ranges and scans")
    args = parser.parse_args(argv)
    fetcher = Fetcher(None)  # the scans are cached, not the hundreds of MB of ranges behind them
    for version in args.versions:
        found = read_release(version, fetcher, cache_dir=args.cache, log=lambda m: print(m, file=sys.stderr))
        print(json.dumps(found), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
