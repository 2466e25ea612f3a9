"""A crafted ELF shared object for the tests of bounded library reads: a real gcc-built library whose
section and program headers are patched to point at tables an attacker made huge.

- its ``.dynsym`` holds ``symbols`` exported, defined symbols (24 bytes each, real data on disk), their
  names spread ``spread`` bytes apart over a string table that spans the whole file (grown sparse to
  ``sparse_to``): a reader that fetches a page per name reads a page per symbol;
- its dynamic section, moved to the end, keeps the library's own entries (its SONAME) and adds
  ``needed`` DT_NEEDED entries whose names lie ``spread`` bytes apart as well.

The file stays a library by its headers (ELF magic, PT_LOAD, PT_DYNAMIC, DT_STRTAB): what a reader
makes of it is the reader's matter.
"""

from __future__ import annotations

import struct
import sys
from array import array
from pathlib import Path

import wheelhouse

SHT_DYNSYM, SHT_GNU_VERSYM = 11, 0x6FFFFFFF
PT_DYNAMIC, DT_NEEDED, DT_STRTAB = 2, 1, 5


def crafted_library(
    path: Path, soname: str, symbols: int = 1 << 20, needed: int = 4000, spread: int = 1 << 16, sparse_to: int = 0
) -> Path:
    built = wheelhouse.shared_library(path.parent / ".crafted" / soname, soname)
    data = bytearray(built.read_bytes())
    shoff = struct.unpack_from("<Q", data, 40)[0]
    shentsize, shnum = struct.unpack_from("<HH", data, 58)
    phoff = struct.unpack_from("<Q", data, 32)[0]
    phentsize, phnum = struct.unpack_from("<HH", data, 54)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    dynsym = next(i for i, s in enumerate(sections) if s[1] == SHT_DYNSYM)
    strtab = sections[dynsym][6]
    for index, section in enumerate(sections):
        if section[1] == SHT_GNU_VERSYM:  # no version table: every crafted symbol counts as unversioned
            struct.pack_into("<I", data, shoff + index * shentsize + 4, 0)
    # The library's own dynamic entries, and where its string table lies in the file.
    header = next(
        struct.unpack_from("<IIQQQQQQ", data, phoff + i * phentsize)
        for i in range(phnum)
        if struct.unpack_from("<I", data, phoff + i * phentsize)[0] == PT_DYNAMIC
    )
    entries = []
    for offset in range(header[2], header[2] + header[5], 16):
        tag, value = struct.unpack_from("<qQ", data, offset)
        if tag == 0:
            break
        entries.append((tag, value))
    data += b"\0" * (-len(data) % 4096)
    dynamic_at = len(data)
    # DT_STRTAB's address maps to a file offset (the library's first PT_LOAD starts at 0 in both).
    strtab_file = next(v for t, v in entries if t == DT_STRTAB)
    table = entries + [(DT_NEEDED, 64 + i * spread) for i in range(needed)] + [(0, 0)]
    data += b"".join(struct.pack("<qQ", tag, value) for tag, value in table)
    data += b"\0" * (-len(data) % 4096)
    symbols_at = len(data)
    total = max(sparse_to, symbols_at + symbols * 24)
    data += _symbol_table(symbols, spread, total - strtab_file - 4096)
    for index, (name, value) in enumerate(
        [(dynsym, (symbols_at, symbols * 24)), (strtab, (strtab_file, total - strtab_file))]
    ):
        del index
        struct.pack_into("<QQ", data, shoff + name * shentsize + 24, *value)
    for i in range(phnum):
        if struct.unpack_from("<I", data, phoff + i * phentsize)[0] == PT_DYNAMIC:
            struct.pack_into(
                "<QQQQQ", data, phoff + i * phentsize + 8, dynamic_at, 0, 0, len(table) * 16, len(table) * 16
            )
    path.parent.mkdir(parents=True, exist_ok=True)
    # A new file, never a write through the old name: uv links what it installs to its cache.
    path.unlink(missing_ok=True)
    with open(path, "wb") as out:
        out.write(bytes(data))
        out.truncate(total)
    return path


def _symbol_table(symbols: int, spread: int, span: int) -> bytes:
    """``symbols`` entries of ``struct.pack("<IBBHQQ", (64 + i * spread) % span, 0x12, 0, 1, 0, 0)``
    (a global function, default visibility, defined in section 1, its name ``spread`` bytes after
    the one before, wrapping in ``span``), built as one array of 32-bit words rather than a million
    packs: six words an entry, the name's offset first, then st_info, st_other and st_shndx."""
    words = array("I", bytes(symbols * 24))
    assert words.itemsize == 4
    offsets, first, left = array("I"), 64 % span, symbols
    while left:  # the offsets rise by ``spread`` until they wrap: one range for each run
        run = min(left, (span - 1 - first) // spread + 1)
        offsets.extend(range(first, first + run * spread, spread))
        first, left = (first + run * spread) % span, left - run
    words[0::6] = offsets
    words[1::6] = array("I", [0x12 | 1 << 16]) * symbols
    if sys.byteorder == "big":
        words.byteswap()
    return words.tobytes()
