"""Read an ELF shared object's dynamic section as a file: SONAME, NEEDED, RUNPATH/RPATH.

This is how doctor learns where TensorFlow's own ``dlopen`` will look, without importing it.
64- and 32-bit, little- and big-endian; anything unreadable returns ``None``.

A file is read at the offsets its headers name (:class:`Image`), never whole: an env's
``lib*.so.N`` may be a 4 GB sparse file or a crafted one, and the dynamic section, symbol table and
names are a few MB of even the largest CUDA library. What a header claims is walked only so far
(:data:`DYNAMIC_LIMIT` entries, :data:`SYMBOL_LIMIT` symbols, :data:`NAME_LIMIT` bytes a name).
"""

from __future__ import annotations

import os
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
DYNAMIC_LIMIT = 4096
"""The most dynamic-section entries read: a real library has a few dozen tags and at most a few
hundred NEEDED; a segment that claims gigabytes of entries without a DT_NULL is cut here."""
SYMBOL_LIMIT = 1 << 20
"""The most dynamic symbols read (TensorFlow's framework library exports about 100,000)."""
PAGE = 1 << 16
PAGES_KEPT = 256
"""An :class:`Image` keeps at most this many pages (16 MiB) read; reading on drops them all."""

_DAMAGED = (struct.error, ValueError, IndexError, OverflowError, untrusted.Unreadable)
"""What a damaged or changing file raises while it is parsed: the file is then no library."""


class Image:
    """An ELF file's bytes read where a parse asks for them, in pages, never the file whole.

    ``fetch(offset, size)`` returns at most ``size`` bytes of the file from ``offset``; ``size`` is
    the file's size when it was opened. A read that comes back short (the file was truncated
    meanwhile) or lies past ``size`` raises ValueError, which the parsers take as a damaged file."""

    def __init__(self, fetch, size: int):
        self._fetch, self.size, self._pages = fetch, size, {}

    @classmethod
    def of_bytes(cls, data: bytes) -> Image:
        return cls(lambda offset, size: data[offset : offset + size], len(data))

    @classmethod
    def of_stream(cls, stream, size: int, source: str) -> Image:
        """A file :func:`tfgpu.untrusted.open_stream` opened; ``size``: its fstat size."""
        return cls(lambda offset, count: untrusted.read_at(stream, offset, count, source), size)

    def _page(self, index: int) -> bytes:
        if index not in self._pages:
            if len(self._pages) >= PAGES_KEPT:
                self._pages.clear()
            self._pages[index] = self._fetch(index * PAGE, PAGE)
        return self._pages[index]

    def bytes(self, start: int, count: int) -> bytes:
        if start < 0 or count < 0 or start + count > self.size:
            raise ValueError("past the end of the file")
        out = bytearray()
        while len(out) < count:
            page, within = divmod(start + len(out), PAGE)
            piece = self._page(page)[within : within + count - len(out)]
            if not piece:
                raise ValueError("the file is shorter than when it was opened")
            out += piece
        return bytes(out)

    def unpack(self, fmt: str, offset: int) -> tuple:
        return struct.unpack(fmt, self.bytes(offset, struct.calcsize(fmt)))

    def string(self, start: int) -> str:
        """The NUL-terminated name at ``start``; ValueError when there is none within NAME_LIMIT bytes."""
        if not 0 <= start < self.size:
            raise ValueError("name outside the file")
        found, at = bytearray(), start
        while len(found) < NAME_LIMIT and at < self.size:
            page, within = divmod(at, PAGE)
            piece = self._page(page)[within : within + NAME_LIMIT - len(found)]
            if not piece:
                raise ValueError("the file is shorter than when it was opened")
            end = piece.find(b"\0")
            if end >= 0:
                return bytes(found + piece[:end]).decode("utf-8", "replace")
            found += piece
            at += len(piece)
        raise ValueError("name without an end")


def _image(data: bytes | Image) -> Image:
    return data if isinstance(data, Image) else Image.of_bytes(data)


def read_dynamic(path: str) -> Dynamic | None:
    """The dynamic section of the ELF file at ``path``; None when it is not one, or a damaged one
    (truncated, header fields pointing past its end, names without an end)."""
    try:
        with untrusted.open_stream(path, untrusted.LIBRARY) as stream:
            return parse_dynamic(Image.of_stream(stream, os.fstat(stream.fileno()).st_size, str(path)))
    except untrusted.Unreadable:
        return None


def parse_dynamic(data: bytes | Image) -> Dynamic | None:
    """:func:`read_dynamic` of a file already open (doctor opens each library once a run) or bytes."""
    try:
        return _dynamic(_image(data))
    except _DAMAGED:
        return None


def _dynamic(image: Image) -> Dynamic | None:
    if image.size < 64 or image.bytes(0, 4) != b"\x7fELF":
        return None
    ident = image.bytes(0, 6)
    is64, endian = ident[4] == 2, "<" if ident[5] == 1 else ">"
    if is64:
        phoff, phentsize, phnum = (image.unpack(endian + "Q", 32)[0], *image.unpack(endian + "HH", 54))
        phdr, dyn_entry = endian + "IIQQQQQQ", endian + "qQ"
    else:
        phoff, phentsize, phnum = (image.unpack(endian + "I", 28)[0], *image.unpack(endian + "HH", 42))
        phdr, dyn_entry = endian + "IIIIIIII", endian + "iI"
    loads, dynamic = [], None
    for index in range(phnum):
        fields = image.unpack(phdr, phoff + index * phentsize)
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
    for offset in range(dynamic[0], dynamic[0] + min(dynamic[1], DYNAMIC_LIMIT * size), size):
        tag, value = image.unpack(dyn_entry, offset)
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
        return image.string(base + offset)

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
        with untrusted.open_stream(path, untrusted.LIBRARY) as stream:
            return parse_exports(Image.of_stream(stream, os.fstat(stream.fileno()).st_size, str(path)))
    except untrusted.Unreadable:
        return None


def parse_exports(data: bytes | Image) -> frozenset[str] | None:
    """:func:`unversioned_exports` of a file already open, or bytes."""
    image = _image(data)
    sections = []
    try:
        if image.size < 64 or image.bytes(0, 6) != b"\x7fELF\x02\x01":
            return None
        shoff = image.unpack("<Q", 40)[0]
        shentsize, shnum = image.unpack("<HH", 58)
        for index in range(shnum):
            sections.append(image.unpack("<IIQQQQIIQQ", shoff + index * shentsize))
        dynsym = next((s for s in sections if s[1] == SHT_DYNSYM), None)
        if dynsym is None:
            return frozenset()
        versym = next((s for s in sections if s[1] == SHT_GNU_VERSYM), None)
        strtab = sections[dynsym[6]]
        str_base, sym_base, count = strtab[4], dynsym[4], min(dynsym[5] // 24, SYMBOL_LIMIT)
        names = set()
        for index in range(1, count):
            st_name, st_info, st_other, st_shndx = image.unpack("<IBBH", sym_base + index * 24)
            if st_shndx == 0 or (st_info >> 4) not in (STB_GLOBAL, STB_WEAK) or st_other & 3:
                continue
            if versym is not None and image.unpack("<H", versym[4] + index * 2)[0] & 0x7FFF > 1:
                continue
            names.add(image.string(str_base + st_name))
    except _DAMAGED:
        return None
    return frozenset(names)
