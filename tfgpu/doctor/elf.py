"""Read an ELF shared object's dynamic section as a file: SONAME, NEEDED, RUNPATH/RPATH.

This is how doctor learns where TensorFlow's own ``dlopen`` will look, without importing it.
64- and 32-bit, little- and big-endian; anything unreadable returns ``None``.

A file is read at the offsets its headers name (:class:`Image`), never whole: an env's
``lib*.so.N`` may be a 4 GB sparse file or a crafted one, and the dynamic section, symbol table and
names are a few MB of even the largest CUDA library. What a header claims is walked only so far
(:data:`DYNAMIC_LIMIT` entries, :data:`SYMBOL_LIMIT` symbols, :data:`NAME_LIMIT` bytes a name), and
every byte fetched counts against a :class:`Budget` of bytes per file and per run: a library that asks
for more raises :class:`Unfinished` (its answer unknown, which the caller says), never a slow read.
Each question reads only what it needs: the dynamic section for SONAME/NEEDED/RUNPATH
(:func:`parse_dynamic`), the dynamic symbol table only for :func:`parse_exports`, whose string table
is read in pieces in table order, never a page per name.
"""

from __future__ import annotations

import os
import struct

from tfgpu.doors import untrusted
from tfgpu.records import record

DT_NEEDED, DT_STRTAB, DT_SONAME, DT_RPATH, DT_RUNPATH = 1, 5, 14, 15, 29
PT_LOAD, PT_DYNAMIC = 1, 2


@record
class Dynamic:
    soname: str | None
    needed: tuple[str, ...]
    runpath: tuple[str, ...]
    """DT_RUNPATH, else DT_RPATH, split on ':' (``$ORIGIN`` not expanded)."""


NAME_LIMIT = 4096
"""The longest symbol name read: a name is looked for its ending NUL only that far, so a file whose
names never end cannot make each lookup scan the rest of the file."""
DYNAMIC_NAME_LIMIT = 1 << 18
"""The longest SONAME, NEEDED or RUNPATH read (256 KiB): TensorFlow 2.21.0's framework library
carries a RUNPATH of 20,358 bytes (each ``nvidia/*/lib`` entry repeated some forty times), which the
symbol names' limit refused as a name without an end, so doctor found none of its CUDA libraries.
The dynamic section's names are bounded by :data:`DYNAMIC_BUDGET` as well, so a crafted one that
never ends still costs at most that."""
DYNAMIC_LIMIT = 4096
"""The most dynamic-section entries read: a real library has a few dozen tags and at most a few
hundred NEEDED; a segment that claims gigabytes of entries without a DT_NULL is cut here."""
SYMBOL_LIMIT = 1 << 21
"""The most dynamic symbols read: a table that claims more is not read at all, and says so
(:class:`Unfinished`). TensorFlow's framework library has grown from 54,668 dynamic symbols (2.13.1)
to 128,870 (2.21.0) and 723,305 (2.22.0rc0, whose 800 MB library exports none of them unversioned);
each symbol is a step of Python (2.22.0rc0's whole table: 0.26 s here), so this bounds the time as
the budget bounds the bytes, with room for the next releases (``tests/test_pip_e2e.py`` reads every
real one within these limits)."""
PAGE = 1 << 12
PAGES_KEPT = 1024
"""An :class:`Image` keeps at most this many pages (4 MiB) read; reading on drops them all."""
CHUNK = 1 << 20
"""The symbol table and its string table are read in pieces of this size, each piece once."""

MiB = 1 << 20
FILE_BUDGET = 64 * MiB
"""The most bytes read of one library's structure. The dynamic section and its names are a few KiB
of any real library; TensorFlow's framework library, whose symbol table only two-stack envs read,
costs its symbols and versions (18.8 MB for 2.22.0rc0's 723,305) and the names of the few it exports
unversioned (15.5 MB for 2.21.0's 128,194), never its whole string table (100 MB in 2.22.0rc0)."""
DYNAMIC_BUDGET = 1 * MiB
"""The most bytes read of one library for its SONAME, NEEDED and RUNPATH: its headers, at most
:data:`DYNAMIC_LIMIT` entries (64 KiB) and their names, which a linker writes side by side (a few
pages); a crafted one that spreads its names a page apart stops here."""
RUN_BUDGET = 128 * MiB
"""The most bytes one run (a doctor, a repair plan, a create's load-hook planning) reads of all the
libraries it looks at: an env's few hundred CUDA libraries cost a few MiB, a framework library's
symbol table at most :data:`FILE_BUDGET`; a crafted one stops here."""


class Unfinished(Exception):
    """A library whose structure asks for more bytes than its :class:`Budget` allows: not a damaged
    file (its answer is not "no library"), but one whose answer is unknown; ``reason`` says why."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class Damaged(Unfinished):
    """A file that starts as an ELF object but whose headers point past its end, at names without an
    end, or that changed while it was read: its answer is unknown too, and a run says so (a
    framework library cut in half is no library the loader can use, never one to pass over)."""


_DAMAGED = (struct.error, ValueError, IndexError, OverflowError, untrusted.Unreadable)
"""What a damaged or changing file raises while it is parsed (:class:`Damaged` is raised instead)."""


def _damaged(error: Exception) -> Damaged:
    why = getattr(error, "reason", None) or str(error) or type(error).__name__
    return Damaged(f"not fully read: its structure is damaged ({why[:200]})")


class Budget:
    """The bytes one run may read of libraries' structure: ``per_file`` of each, ``run`` in all.

    One object for one command's run, passed to every :class:`Image` it opens; what was read of a
    library counts however often its parse returns to the same bytes (pages are kept)."""

    def __init__(self, run: int = RUN_BUDGET, per_file: int = FILE_BUDGET):
        self.run, self.per_file, self.spent = run, per_file, 0

    def charge(self, count: int, file_spent: int, cap: int, what: str = "its structure") -> None:
        """Count ``count`` more bytes of a file that has cost ``file_spent`` so far; Unfinished (naming
        ``what`` asked for them) when the file's share (``cap``) or the run's would pass its limit."""
        self.afford(count, file_spent, cap, what)
        self.spent += count

    def afford(self, count: int, file_spent: int, cap: int, what: str = "its structure") -> None:
        """Unfinished when ``count`` more bytes would pass the file's ``cap`` or the run's; counts nothing."""
        if file_spent + count > cap:
            raise Unfinished(f"not fully read: {what} asks for more than the {cap:,} bytes read of one library for it")
        if self.spent + count > self.run:
            raise Unfinished(
                f"not fully read: {what} asks for more than is left of the {self.run:,} bytes one run reads of libraries"
            )


class Image:
    """An ELF file's bytes read where a parse asks for them, in pages, never the file whole, and never
    more than its :class:`Budget` allows (a fresh one per Image unless one is given).

    ``fetch(offset, size)`` returns at most ``size`` bytes of the file from ``offset``; ``size`` is
    the file's size when it was opened. A read that comes back short (the file was truncated
    meanwhile) or lies past ``size`` raises ValueError, which the parsers take as a damaged file."""

    def __init__(self, fetch, size: int, budget: Budget | None = None):
        self._fetch, self.size = fetch, size
        self._pages: dict[int, bytes] = {}
        self.budget = Budget() if budget is None else budget
        self.spent = 0
        """Bytes fetched of this file so far."""
        self.cap = self.budget.per_file
        self.asking = "its structure"
        """The most bytes fetched of this file (a question may lower it while it asks)."""

    @classmethod
    def of_bytes(cls, data: bytes, budget: Budget | None = None) -> Image:
        return cls(lambda offset, size: data[offset : offset + size], len(data), budget)

    @classmethod
    def of_stream(cls, stream, size: int, source: str, budget: Budget | None = None) -> Image:
        """A file :func:`tfgpu.doors.untrusted.open_stream` opened; ``size``: its fstat size."""
        return cls(lambda offset, count: untrusted.read_at(stream, offset, count, source), size, budget)

    def _read(self, offset: int, count: int) -> bytes:
        count = max(0, min(count, self.size - offset))
        self.budget.charge(count, self.spent, self.cap, self.asking)
        self.spent += count
        data = self._fetch(offset, count)
        if len(data) != count:
            raise ValueError("the file is shorter than when it was opened")
        return data

    def _page(self, index: int) -> bytes:
        if index not in self._pages:
            if len(self._pages) >= PAGES_KEPT:
                self._pages.clear()
            self._pages[index] = self._read(index * PAGE, PAGE)
        return self._pages[index]

    def bytes(self, start: int, count: int) -> bytes:
        if start < 0 or count < 0 or start + count > self.size:
            raise ValueError("past the end of the file")
        if count > PAGE:  # a table: read once, in one piece, not kept
            return self._read(start, count)
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

    def string(self, start: int, limit: int = NAME_LIMIT) -> str:
        """The NUL-terminated name at ``start``; ValueError when there is none within ``limit`` bytes."""
        if not 0 <= start < self.size:
            raise ValueError("name outside the file")
        found, at = bytearray(), start
        while len(found) < limit and at < self.size:
            page, within = divmod(at, PAGE)
            piece = self._page(page)[within : within + limit - len(found)]
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
    (truncated, header fields pointing past its end, names without an end), or one past a fresh
    :class:`Budget` (callers that must say so use :class:`tfgpu.doctor.reads.RunReads`)."""
    try:
        with untrusted.open_stream(path, untrusted.LIBRARY) as stream:
            return parse_dynamic(Image.of_stream(stream, os.fstat(stream.fileno()).st_size, str(path)))
    except (untrusted.Unreadable, Unfinished):
        return None


def parse_dynamic(data: bytes | Image) -> Dynamic | None:
    """:func:`read_dynamic` of a file already open (doctor opens each library once a run) or bytes;
    raises :class:`Unfinished` where the file asks for more than its budget, :class:`Damaged` where
    an ELF file's headers lead past its end or to names without one."""
    image = _image(data)
    cap, asking = image.cap, image.asking
    image.cap, image.asking = min(cap, image.spent + DYNAMIC_BUDGET), "its dynamic section with its names"
    try:
        return _dynamic(image)
    except _DAMAGED as error:
        raise _damaged(error) from None
    finally:
        image.cap, image.asking = cap, asking


def _table(image: Image, offset: int, count: int, entry: int, fmt: str, what: str) -> list[tuple]:
    """``count`` entries of ``entry`` bytes at ``offset``, each unpacked by ``fmt``: read in one piece."""
    if count and entry < struct.calcsize(fmt):
        raise ValueError(f"{what}: entries shorter than their fields")
    image.budget.afford(count * entry, image.spent, image.cap, what)
    data = image.bytes(offset, count * entry)
    return [struct.unpack_from(fmt, data, index * entry) for index in range(count)]


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
    for fields in _table(image, phoff, phnum, phentsize, phdr, "its program header table"):
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
    size = struct.calcsize(dyn_entry)
    count = min(dynamic[1], DYNAMIC_LIMIT * size, image.size - min(dynamic[0], image.size)) // size
    entries = []
    for tag, value in _table(image, dynamic[0], count, size, dyn_entry, "its dynamic section"):
        if tag == 0:
            break
        entries.append((tag, value))
    strtab = next((v for t, v in entries if t == DT_STRTAB), None)
    base = next(
        (off + (strtab - vaddr) for vaddr, off, size_ in loads if vaddr <= (strtab or -1) < vaddr + size_), None
    )
    if base is None:
        if strtab is not None:  # names that lie nowhere in the file: a crafted or damaged table
            raise ValueError("its string table lies outside every segment the file loads")
        return None

    def string(offset: int) -> str:
        return image.string(base + offset, DYNAMIC_NAME_LIMIT)

    soname = next((string(v) for t, v in entries if t == DT_SONAME), None)
    needed = tuple(string(v) for t, v in entries if t == DT_NEEDED)
    runpath = next((string(v) for t, v in entries if t == DT_RUNPATH), None)
    runpath = runpath if runpath is not None else next((string(v) for t, v in entries if t == DT_RPATH), "")
    return Dynamic(soname=soname, needed=needed, runpath=tuple(dict.fromkeys(p for p in runpath.split(":") if p)))


SHT_DYNSYM, SHT_GNU_VERSYM = 11, 0x6FFFFFFF
STB_GLOBAL, STB_WEAK = 1, 2
_SYMBOLS_A_PIECE = CHUNK // 24


def unversioned_exports(path: str) -> frozenset[str] | None:
    """The names a 64-bit little-endian shared object defines and exports *without* a symbol version
    (``.gnu.version`` index 0 or 1, or no version table at all), default visibility. The dynamic
    loader lets such a definition satisfy a versioned reference from another library
    (``cudaMalloc@libcudart.so.13``), so a library loaded RTLD_GLOBAL that exports them interposes
    on every library loaded after it. ``None`` when the file is not such an object, or is one whose
    tables pass a fresh :class:`Budget`."""
    try:
        with untrusted.open_stream(path, untrusted.LIBRARY) as stream:
            return parse_exports(Image.of_stream(stream, os.fstat(stream.fileno()).st_size, str(path)))
    except (untrusted.Unreadable, Unfinished):
        return None


def parse_exports(data: bytes | Image) -> frozenset[str] | None:
    """:func:`unversioned_exports` of a file already open, or bytes; raises :class:`Unfinished` where
    the symbol table, its versions and its string table together pass the budget (decided before any
    of them is read) or claim more than :data:`SYMBOL_LIMIT` symbols; :class:`Damaged` as
    :func:`parse_dynamic` does."""
    image = _image(data)
    asking, image.asking = image.asking, "its symbol table with its names"
    try:
        return _exports(image)
    except _DAMAGED as error:
        raise _damaged(error) from None
    finally:
        image.asking = asking


def _exports(image: Image) -> frozenset[str] | None:
    if image.size < 64 or image.bytes(0, 6) != b"\x7fELF\x02\x01":
        return None
    shoff = image.unpack("<Q", 40)[0]
    shentsize, shnum = image.unpack("<HH", 58)
    sections = _table(image, shoff, shnum, shentsize, "<IIQQQQIIQQ", "its section header table")
    dynsym = next((s for s in sections if s[1] == SHT_DYNSYM), None)
    if dynsym is None:
        return frozenset()
    versym = next((s for s in sections if s[1] == SHT_GNU_VERSYM), None)
    strtab = sections[dynsym[6]]
    sym_base, count, str_base, str_size = dynsym[4], dynsym[5] // 24, strtab[4], strtab[5]
    if count > SYMBOL_LIMIT:
        raise Unfinished(f"not fully read: its symbol table claims {count:,} symbols, past the {SYMBOL_LIMIT:,} read")
    # The symbols' cost is known from the headers: a table past the budget is refused before any of
    # it is read, rather than after a second of reading. The symbols and their versions are read whole; of the string table only the names of the
    # symbols that qualify, each piece counted as it is read (the table itself may be far larger).
    tables = count * 24 + (count * 2 if versym is not None else 0)
    image.budget.afford(tables, image.spent, image.cap, "its symbol table")
    offsets = set()
    for first in range(1, count, _SYMBOLS_A_PIECE):  # symbol 0 is the undefined one
        many = min(_SYMBOLS_A_PIECE, count - first)
        symbols = image.bytes(sym_base + first * 24, many * 24)
        versions = image.bytes(versym[4] + first * 2, many * 2) if versym is not None else b""
        for index, (st_name, st_info, st_other, st_shndx) in enumerate(struct.iter_unpack("<IBBH16x", symbols)):
            if st_shndx == 0 or (st_info >> 4) not in (STB_GLOBAL, STB_WEAK) or st_other & 3:
                continue
            if versions and int.from_bytes(versions[index * 2 : index * 2 + 2], "little") & 0x7FFF > 1:
                continue
            offsets.add(st_name)
    # The names in string-table order, a piece at a time: each byte of the table is read once, not
    # a page per name (a crafted table spreads its names a page apart).
    names, window, start, held = set(), b"", 0, 0
    for offset in sorted(offsets):
        if offset >= str_size:
            raise ValueError("a name outside its string table")
        if offset + NAME_LIMIT > start + len(window) and start + len(window) < str_size:
            start, window = offset, image.bytes(str_base + offset, min(CHUNK + NAME_LIMIT, str_size - offset))
        end = window.find(b"\0", offset - start, offset - start + NAME_LIMIT)
        if end < 0:
            raise ValueError("a name without an end")
        # Names may overlap (each a suffix of the one before): what they hold is bounded too, so a
        # quarter million 4 KiB names cannot fill memory. It is memory, not bytes read: it counts
        # against its own cap, not the file's or the run's reads (TensorFlow 2.21's framework
        # library, 15.5 MB of names fetched once, would otherwise be counted twice and refused).
        held += end - (offset - start)
        if held > image.cap:
            raise Unfinished(
                f"not fully read: its symbol names hold more than the {image.cap:,} bytes kept of one library"
            )
        names.add(window[offset - start : end].decode("utf-8", "replace"))
    return frozenset(names)
