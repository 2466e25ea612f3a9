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


def read_dynamic(path: str) -> Dynamic | None:
    try:
        data = untrusted.read_bytes(path, untrusted.LIBRARY)
    except untrusted.Unreadable:
        return None
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
        end = data.index(b"\0", base + offset)
        return data[base + offset : end].decode("utf-8", "replace")

    soname = next((string(v) for t, v in entries if t == DT_SONAME), None)
    needed = tuple(string(v) for t, v in entries if t == DT_NEEDED)
    runpath = next((string(v) for t, v in entries if t == DT_RUNPATH), None)
    runpath = runpath if runpath is not None else next((string(v) for t, v in entries if t == DT_RPATH), "")
    return Dynamic(soname=soname, needed=needed, runpath=tuple(dict.fromkeys(p for p in runpath.split(":") if p)))
