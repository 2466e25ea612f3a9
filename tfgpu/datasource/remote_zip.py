"""The members of a remote zip (a wheel), read through a ``fetch(start, end)`` callable.

APPNOTE.TXT 4.3: the end-of-central-directory record (zip64 aware), the central directory read
chunk by chunk, and the local headers of just the members wanted. ``read_wheel_members`` returns
the members the release readers need: ``*.dist-info/METADATA``, ``build_info.py`` and the two
CUDA headers TensorFlow ships under ``include/``. Members larger than ``MAX_MEMBER_BYTES``
(compressed) are never read this way: a whole library is streamed by ``member_span`` users.
"""

from __future__ import annotations

import re
import struct
import zlib
from typing import NamedTuple

from tfgpu.datasource.errors import SourceError

#: build_info.py: tensorflow_core/ in 2.0 and 2.1.
BUILD_INFO_MEMBERS = ("tensorflow/python/platform/build_info.py", "tensorflow_core/python/platform/build_info.py")
#: The CUDA configuration header: third_party/gpus (2.22+) or the older local_config_cuda copy.
CUDA_CONFIG_MEMBERS = (
    "tensorflow/include/third_party/gpus/cuda/cuda_config.h",
    "tensorflow/include/external/local_config_cuda/cuda/cuda/cuda_config.h",
    "tensorflow_core/include/external/local_config_cuda/cuda/cuda/cuda_config.h",
)
#: cudnn_version.h of the cuDNN TensorFlow was compiled against.
CUDNN_VERSION_MEMBERS = (
    "tensorflow/include/third_party/gpus/cudnn/include/cudnn_version.h",
    "tensorflow/include/external/cuda_cudnn/include/cudnn_version.h",
)
METADATA_MEMBER = re.compile(r"^[^/]+\.dist-info/METADATA$")
MAX_MEMBER_BYTES = 4 * 1024 * 1024

EOCD = b"PK\x05\x06"
ZIP64_LOCATOR = b"PK\x06\x07"
ZIP64_EOCD = b"PK\x06\x06"
CENTRAL_ENTRY = b"PK\x01\x02"
LOCAL_HEADER = b"PK\x03\x04"
TAIL_BYTES = 8 * 1024  # a wheel has no archive comment: the EOCD is the last 22 bytes
MAX_TAIL_BYTES = 22 + 0xFFFF + 20  # EOCD + longest comment + zip64 locator
CD_CHUNK = 512 * 1024  # read the central directory in chunks
LOCAL_SLACK = 1024  # room for the local header's extra field
#: The largest central directory read: a wheel of 20,000 members has about 3 MiB of it; a larger
#: claim is a hostile or broken file, refused before it is fetched chunk by chunk.
MAX_CENTRAL_DIRECTORY = 64 * 1024 * 1024


class ZipEntry(NamedTuple):
    """A central-directory entry: where a member's local header is and how it is stored."""

    name: str
    method: int
    compressed_size: int
    size: int
    header_offset: int
    crc32: int = 0


class WheelMembers(NamedTuple):
    """The members the release readers use (None when absent), and the names of all members."""

    metadata: str | None
    build_info: str | None
    cuda_config: str | None
    cudnn_version: str | None
    entries: tuple[ZipEntry, ...]


def _wanted_key(name: str) -> str | None:
    if METADATA_MEMBER.match(name):
        return "metadata"
    for key, names in (
        ("build_info", BUILD_INFO_MEMBERS),
        ("cuda_config", CUDA_CONFIG_MEMBERS),
        ("cudnn_version", CUDNN_VERSION_MEMBERS),
    ):
        if name in names:
            return key
    return None


def _preference(key: str, name: str) -> int:
    names = {
        "build_info": BUILD_INFO_MEMBERS,
        "cuda_config": CUDA_CONFIG_MEMBERS,
        "cudnn_version": CUDNN_VERSION_MEMBERS,
    }.get(key, (name,))
    return names.index(name) if name in names else 0


def read_wheel_members(fetch, size: int) -> WheelMembers:
    """Read METADATA, build_info.py and the CUDA headers from a zip of ``size`` bytes.

    ``fetch(start, end)`` returns the bytes ``start`` .. ``end`` (inclusive) of the file.
    """
    entries = tuple(central_directory(fetch, size))
    found: dict[str, ZipEntry] = {}
    for entry in entries:
        key = _wanted_key(entry.name)
        if key and (key not in found or _preference(key, entry.name) < _preference(key, found[key].name)):
            found[key] = entry
    text = {key: read_member(fetch, size, entry).decode("utf-8", "replace") for key, entry in found.items()}
    return WheelMembers(
        text.get("metadata"), text.get("build_info"), text.get("cuda_config"), text.get("cudnn_version"), entries
    )


def central_directory(fetch, size: int):
    """Yield every central-directory entry of the zip, fetching the directory chunk by chunk."""
    offset, cd_size = _locate_central_directory(fetch, size)
    buf, pos, next_fetch, end = b"", 0, offset, offset + cd_size
    while True:
        while len(buf) - pos >= 46:
            if buf[pos : pos + 4] != CENTRAL_ENTRY:
                raise SourceError("central directory entry without its signature")
            name_len, extra_len, comment_len = struct.unpack_from("<HHH", buf, pos + 28)
            total = 46 + name_len + extra_len + comment_len
            if len(buf) - pos < total:
                break
            yield _parse_central_entry(buf[pos : pos + total])
            pos += total
        if next_fetch >= end:
            return
        chunk_end = min(end, next_fetch + CD_CHUNK)
        buf = buf[pos:] + fetch(next_fetch, chunk_end - 1)
        pos, next_fetch = 0, chunk_end


def _locate_central_directory(fetch, size: int) -> tuple[int, int]:
    for tail_len in (min(size, TAIL_BYTES), min(size, MAX_TAIL_BYTES)):
        tail_start = size - tail_len
        tail = fetch(tail_start, size - 1)
        at = tail.rfind(EOCD)
        if at >= 0:
            break
    else:
        raise SourceError("no end-of-central-directory record: not a zip file")
    cd_size, cd_offset = struct.unpack_from("<II", tail, at + 12)
    if at >= 20 and tail[at - 20 : at - 16] == ZIP64_LOCATOR:
        (eocd64_offset,) = struct.unpack_from("<Q", tail, at - 20 + 8)
        if eocd64_offset >= tail_start:
            record = tail[eocd64_offset - tail_start : eocd64_offset - tail_start + 56]
        else:
            record = fetch(eocd64_offset, eocd64_offset + 55)
        if record[:4] != ZIP64_EOCD:
            raise SourceError("zip64 locator points at no zip64 end-of-central-directory record")
        cd_size, cd_offset = struct.unpack_from("<QQ", record, 40)
    if cd_offset + cd_size > size:
        raise SourceError(f"central directory {cd_offset}+{cd_size} lies past the end ({size})")
    if cd_size > MAX_CENTRAL_DIRECTORY:
        raise SourceError(
            f"central directory of {cd_size} bytes, more than the {MAX_CENTRAL_DIRECTORY} a wheel's can be"
        )
    return cd_offset, cd_size


def _parse_central_entry(raw: bytes) -> ZipEntry:
    (flags, method, crc, csize, usize, name_len, extra_len, offset) = struct.unpack_from("<8xHH4xIIIHH10xI", raw)
    name = raw[46 : 46 + name_len].decode("utf-8" if flags & 0x800 else "cp437")
    extra = raw[46 + name_len : 46 + name_len + extra_len]
    while len(extra) >= 4:  # zip64 extended information (APPNOTE 4.5.3)
        tag, length = struct.unpack_from("<HH", extra)
        if 4 + length > len(extra):
            raise SourceError(f"{name}: an extra field runs past its central directory entry")
        if tag == 0x0001:
            values = iter(struct.unpack_from(f"<{length // 8}Q", extra, 4))
            # a field at 0xFFFFFFFF must be in the zip64 record; a record that lacks it is a broken zip
            # (next() inside the central_directory generator would surface as a RuntimeError)
            missing = SourceError(f"{name}: a zip64 size or offset is missing from its extra field")
            if usize == 0xFFFFFFFF:
                usize = next(values, None)
            if csize == 0xFFFFFFFF and usize is not None:
                csize = next(values, None)
            if offset == 0xFFFFFFFF and None not in (usize, csize):
                offset = next(values, None)
            if None in (usize, csize, offset):
                raise missing
        extra = extra[4 + length :]
    return ZipEntry(name, method, csize, usize, offset, crc)


def member_span(fetch, entry: ZipEntry) -> tuple[int, int]:
    """(first byte, end) of the member's compressed data in the file, past its local header."""
    raw = fetch(entry.header_offset, entry.header_offset + 29)
    if raw[:4] != LOCAL_HEADER:
        raise SourceError(f"{entry.name}: no local file header at {entry.header_offset}")
    name_len, extra_len = struct.unpack_from("<HH", raw, 26)
    start = entry.header_offset + 30 + name_len + extra_len
    return start, start + entry.compressed_size


def read_member(fetch, size: int, entry: ZipEntry, max_bytes: int = MAX_MEMBER_BYTES) -> bytes:
    """A small member's uncompressed bytes (stored or deflated; CRC checked)."""
    if entry.compressed_size > max_bytes or entry.size > 4 * max_bytes:
        raise SourceError(f"{entry.name}: {entry.compressed_size} bytes, more than this reader reads")
    want = 30 + len(entry.name.encode()) + LOCAL_SLACK + entry.compressed_size
    raw = fetch(entry.header_offset, min(size, entry.header_offset + want) - 1)
    if raw[:4] != LOCAL_HEADER:
        raise SourceError(f"{entry.name}: no local file header at {entry.header_offset}")
    name_len, extra_len = struct.unpack_from("<HH", raw, 26)
    start = 30 + name_len + extra_len
    if start + entry.compressed_size > len(raw):
        raw += fetch(entry.header_offset + len(raw), entry.header_offset + start + entry.compressed_size - 1)
    data = raw[start : start + entry.compressed_size]
    if entry.method == 8:
        # Never more than the directory's size plus one byte: a member that inflates past what
        # its entry claims (a deflate bomb) is refused without being inflated whole.
        inflater = zlib.decompressobj(-15)
        try:
            data = inflater.decompress(data, entry.size + 1)
        except zlib.error as exc:
            raise SourceError(f"{entry.name}: corrupt deflate data ({exc})") from None
    elif entry.method != 0:
        raise SourceError(f"{entry.name}: unsupported compression method {entry.method}")
    if len(data) != entry.size:
        raise SourceError(
            f"{entry.name}: {'more' if len(data) > entry.size else 'fewer'} bytes than the {entry.size} "
            "its directory entry claims (the bytes read are not the member)"
        )
    if zlib.crc32(data) != entry.crc32:
        raise SourceError(f"{entry.name}: CRC-32 mismatch (the bytes read are not the member)")
    return data
