"""Read an ELF shared object's dynamic section as a file: SONAME, NEEDED, RUNPATH/RPATH.

This is how doctor learns where TensorFlow's own ``dlopen`` will look, without importing it.
64- and 32-bit, little- and big-endian; anything unreadable returns ``None``.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from tfgpu import untrusted

DT_NEEDED, DT_STRTAB, DT_SONAME, DT_RPATH, DT_RUNPATH = 1, 5, 14, 15, 29
PT_LOAD, PT_DYNAMIC = 1, 2


@dataclass(frozen=True)
class Dynamic:
    soname: str | None
    needed: tuple[str, ...]
    runpath: tuple[str, ...]
    """DT_RUNPATH, else DT_RPATH, split on ':' (``$ORIGIN`` not expanded)."""


NAME_LIMIT = 4096
"""The longest name (SONAME, NEEDED, RUNPATH, symbol) read: a name is looked for its ending NUL only
that far, so a file whose names never end cannot make each lookup scan the rest of the file."""


def _string(data: bytes, start: int) -> str:
    """The NUL-terminated name at ``start``; ValueError when there is none within NAME_LIMIT bytes."""
    if not 0 <= start < len(data):
        raise ValueError("name outside the file")
    end = data.find(b"\0", start, start + NAME_LIMIT)
    if end < 0:
        raise ValueError("name without an end")
    return data[start:end].decode("utf-8", "replace")


def read_dynamic(path: str) -> Dynamic | None:
    """The dynamic section of the ELF file at ``path``; None when it is not one, or a damaged one
    (truncated, header fields pointing past its end, names without an end)."""
    try:
        data = untrusted.read_bytes(path, untrusted.LIBRARY)
    except untrusted.Unreadable:
        return None
    return parse_dynamic(data)


def parse_dynamic(data: bytes) -> Dynamic | None:
    """:func:`read_dynamic` of bytes already read (doctor reads each library once a run)."""
    try:
        return _dynamic(data)
    except (struct.error, ValueError, IndexError, OverflowError):
        return None


def _dynamic(data: bytes) -> Dynamic | None:
    if data[:4] != b"\x7fELF" or len(data) < 64:
        return None
    is64, endian = data[4] == 2, "<" if data[5] == 1 else ">"
    if is64:
        phoff, phentsize, phnum = (
            struct.unpack_from(endian + "Q", data, 32)[0],
            *struct.unpack_from(endian + "HH", data, 54),
        )
        phdr, dyn_entry = endian + "IIQQQQQQ", endian + "qQ"
    else:
        phoff, phentsize, phnum = (
            struct.unpack_from(endian + "I", data, 28)[0],
            *struct.unpack_from(endian + "HH", data, 42),
        )
        phdr, dyn_entry = endian + "IIIIIIII", endian + "iI"
    loads, dynamic = [], None
    for index in range(phnum):
        fields = struct.unpack_from(phdr, data, phoff + index * phentsize)
        if is64:
            p_type, _, p_offset, p_vaddr, _, p_filesz, _, _ = fields
        else:
            p_type, p_offset, p_vaddr, _, p_filesz, _, _, _ = fields
        if p_type == PT_LOAD:
            loads.append((p_vaddr, p_offset, p_filesz))
        elif p_type == PT_DYNAMIC:
            dynamic = (p_offset, p_filesz)
    if dynamic is None:
        return None
    entries, size = [], struct.calcsize(dyn_entry)
    for offset in range(dynamic[0], dynamic[0] + dynamic[1], size):
        tag, value = struct.unpack_from(dyn_entry, data, offset)
        if tag == 0:
            break
        entries.append((tag, value))
    strtab = next((v for t, v in entries if t == DT_STRTAB), None)
    base = next(
        (off + (strtab - vaddr) for vaddr, off, size_ in loads if vaddr <= (strtab or -1) < vaddr + size_), None
    )
    if base is None:
        return None

    def string(offset: int) -> str:
        return _string(data, base + offset)

    soname = next((string(v) for t, v in entries if t == DT_SONAME), None)
    needed = tuple(string(v) for t, v in entries if t == DT_NEEDED)
    runpath = next((string(v) for t, v in entries if t == DT_RUNPATH), None)
    runpath = runpath if runpath is not None else next((string(v) for t, v in entries if t == DT_RPATH), "")
    return Dynamic(soname=soname, needed=needed, runpath=tuple(dict.fromkeys(p for p in runpath.split(":") if p)))


SHT_DYNSYM, SHT_GNU_VERSYM = 11, 0x6FFFFFFF
STB_GLOBAL, STB_WEAK = 1, 2


def unversioned_exports(path: str) -> frozenset[str] | None:
    """The names a 64-bit little-endian shared object defines and exports *without* a symbol version
    (``.gnu.version`` index 0 or 1, or no version table at all), default visibility. The dynamic
    loader lets such a definition satisfy a versioned reference from another library
    (``cudaMalloc@libcudart.so.13``), so a library loaded RTLD_GLOBAL that exports them interposes
    on every library loaded after it. ``None`` when the file is not such an object."""
    try:
        data = untrusted.read_bytes(path, untrusted.LIBRARY)
    except untrusted.Unreadable:
        return None
    return parse_exports(data)


def parse_exports(data: bytes) -> frozenset[str] | None:
    """:func:`unversioned_exports` of bytes already read."""
    if data[:4] != b"\x7fELF" or len(data) < 64 or data[4] != 2 or data[5] != 1:
        return None
    shoff = struct.unpack_from("<Q", data, 40)[0]
    shentsize, shnum = struct.unpack_from("<HH", data, 58)
    sections = []
    try:
        for index in range(shnum):
            sections.append(struct.unpack_from("<IIQQQQIIQQ", data, shoff + index * shentsize))
        dynsym = next((s for s in sections if s[1] == SHT_DYNSYM), None)
        if dynsym is None:
            return frozenset()
        versym = next((s for s in sections if s[1] == SHT_GNU_VERSYM), None)
        strtab = sections[dynsym[6]]
        str_base, sym_base, count = strtab[4], dynsym[4], dynsym[5] // 24
        names = set()
        for index in range(1, count):
            st_name, st_info, st_other, st_shndx = struct.unpack_from("<IBBH", data, sym_base + index * 24)
            if st_shndx == 0 or (st_info >> 4) not in (STB_GLOBAL, STB_WEAK) or st_other & 3:
                continue
            if versym is not None and struct.unpack_from("<H", data, versym[4] + index * 2)[0] & 0x7FFF > 1:
                continue
            names.add(_string(data, str_base + st_name))
    except (struct.error, ValueError, IndexError, OverflowError):
        return None
    return frozenset(names)
