"""What one doctor run reads of an env's files, bounded: each library's ELF data at most once, and
file contents hashed only where a RECORD's size has not already decided, up to a budget per run.

An env's RECORDs are its own text: a row may name a 50 GB sparse file, a FIFO or a device node, and
two dozen rows may name one library through links. Hashing such a file whole, or parsing one library
once per row that names it, makes doctor slow or hang; so every check of one run asks one
:class:`RunReads` (made with the run's :class:`~tfgpu.doctor.envfacts.EnvFacts`, never shared between
runs), which opens files only through :mod:`tfgpu.doors.untrusted` (regular files only, opened without
blocking) and says what it did not hash and why rather than nothing. Libraries are read within one
:class:`tfgpu.doctor.elf.Budget` of bytes (per file and for the run), each question only when asked
(the symbol table only by the two-stack checks), and a library past it is kept in ``unfinished``
for the command to name: doctor's ``env.library-reads``, the repair plan's and create's notes.
"""

from __future__ import annotations

import hashlib
import os

from tfgpu.doctor import elf
from tfgpu.doors import untrusted
from tfgpu.records import factory, record

GiB = 1024 * 1024 * 1024
HASH_BUDGET = 16 * GiB
"""The most bytes one doctor run hashes; a file past what is left of it is reported as not checked.
On the H200, doctor on a TF 2.21 + torch 2.11 env (each with its CUDA stack) hashed past 4 GiB:
every file of TensorFlow's CUDA 12 wheels kept apart, and the files both stacks own. A file whose
size no RECORD row lists is decided without reading, so a huge file costs nothing unless a RECORD
claims its size; then at most this much is read (sha256 at about 1 GB/s: seconds, not minutes)."""
BLOCK = 1 << 20


@record
class Hashed:
    """What was learnt of one file's bytes."""

    digest: str | None
    """Its sha256 (hex); None when it was not hashed (missing, decided by size, or ``skipped``)."""
    size: int | None
    """Its size; None when it is missing."""
    skipped: str = ""
    """Why its bytes were not hashed though they might have decided something ("" when they were, or
    when the size already decided): not a regular file, or too large for what is left of the budget."""


@record(frozen=False)
class RunReads:
    """One doctor run's reader of env files (see the module's docstring)."""

    budget: int = HASH_BUDGET
    hashed: int = 0
    """Bytes hashed so far in this run."""
    library_budget: elf.Budget = factory(elf.Budget)
    """The bytes this run reads of libraries' structure (per file and in all)."""
    unfinished: dict[str, str] = factory(dict)
    """Library path -> why it was not fully read (its answer unknown, not "no library"): what the
    command reports, so a crafted library is said, not silently taken for no library."""
    _elf: dict[tuple, object] = factory(dict)

    def hash(self, path: os.PathLike | str, sizes: set[int] | frozenset[int] = frozenset()) -> Hashed:
        """The sha256 of ``path`` read in blocks; not read at all when ``sizes`` (the sizes its RECORD
        rows list, every row listing one) does not hold its size, which already says it matches none."""
        try:
            stream = untrusted.open_stream(path, untrusted.ENV_FILE)
        except untrusted.Unreadable as error:
            if not os.path.lexists(path):
                return Hashed(None, None)
            why = error.reason.rpartition("): ")[2].rstrip(".")
            return Hashed(None, None, f"not checked ({why})")
        with stream:
            size = os.fstat(stream.fileno()).st_size
            if sizes and size not in sizes:
                return Hashed(None, size)
            if size > self.budget - self.hashed:
                why = (
                    f"too large: {size:,} bytes, past the {self.budget:,} bytes one doctor run hashes"
                    if size > self.budget
                    else f"{size:,} bytes, past the {self.budget - self.hashed:,} bytes this doctor run has left "
                    f"of the {self.budget:,} it hashes"
                )
                return Hashed(None, size, f"not checked ({why})")
            digest, read = hashlib.sha256(), 0
            # Read no more than the size it had when opened: a file that grows meanwhile cannot pass the budget.
            while read < size:
                block = stream.read(min(BLOCK, size - read))
                if not block:
                    break
                digest.update(block)
                read += len(block)
            self.hashed += read
            if read != size or os.fstat(stream.fileno()).st_size != size:
                # Another writer (pip reinstalling the wheel) cut or grew it meanwhile: the bytes read
                # are no file's, and comparing them would call every owner a loser.
                return Hashed(None, size, "not checked (it changed while it was read)")
            return Hashed(digest.hexdigest(), size)

    def dynamic(self, path: os.PathLike | str) -> elf.Dynamic | None:
        """:func:`tfgpu.doctor.elf.read_dynamic`, each library read once in this run."""
        return self._library(path, "dynamic")

    def exports(self, path: os.PathLike | str) -> frozenset[str] | None:
        """:func:`tfgpu.doctor.elf.unversioned_exports`, each library read once in this run: its symbol
        table only when this is asked (only two-stack envs ask, of TensorFlow's framework library)."""
        return self._library(path, "exports")

    def _library(self, path: os.PathLike | str, question: str):
        # Keyed by the file, not the name: links and hard links to one library, and the rows of
        # several RECORDs that name it, are one read; a file replaced meanwhile has a new key. The
        # key is the fstat of the very descriptor read, so a name swapped between a stat and the
        # read cannot file one library's data under another's key. The file is read where its
        # headers point (elf.Image), never whole, and within the run's elf.Budget: a 4 GB sparse
        # lib*.so.N costs a few pages, a crafted one at most the budget's share of one file.
        try:
            stream = untrusted.open_stream(path, untrusted.LIBRARY)
        except untrusted.Unreadable as error:
            # A name that is there but no file to read (a FIFO, a directory, a device, a link loop):
            # its answer is unknown, and the command says so rather than passing it over as no library.
            if _there(path):
                why = error.reason.rpartition("): ")[2].rstrip(".") or error.reason
                self.unfinished.setdefault(str(path), f"not read: {why[:200]}")
            return None
        with stream:
            info = os.fstat(stream.fileno())
            # The change time too: a file rewritten in place (same inode, same size) with its mtime put
            # back (touch -r) keeps the other four; no one but the kernel sets the change time.
            key = (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns, question)
            if key not in self._elf:
                self._elf[key] = None
                if info.st_size > untrusted.LIBRARY.limit:
                    self.unfinished.setdefault(
                        str(path),
                        f"not read: {info.st_size:,} bytes, past the {untrusted.LIBRARY.limit:,} a library may be",
                    )
                else:
                    image = elf.Image.of_stream(stream, info.st_size, str(path), self.library_budget)
                    try:
                        self._elf[key] = elf.parse_dynamic(image) if question == "dynamic" else elf.parse_exports(image)
                    except elf.Unfinished as unfinished:
                        self.unfinished.setdefault(str(path), unfinished.reason)
        return self._elf[key]


def _there(path: os.PathLike | str) -> bool:
    """Whether ``path`` names something (a link loop included), not nothing or a dangling link: a link
    whose target is gone is a missing library, which the checks that look for it say."""
    try:
        os.stat(path)
    except (FileNotFoundError, ValueError):  # ValueError: a name with a NUL names no file
        return False
    except OSError:
        return True
    return True


def unfinished_lines(reads: RunReads, root: os.PathLike | str | None = None) -> list[str]:
    """One line per library ``reads`` did not fully read: its path (relative to ``root`` where it lies
    in it: a staging directory's name means nothing once the env is moved) and why."""
    lines = []
    for path, why in sorted(reads.unfinished.items()):
        shown = os.path.relpath(path, root) if root is not None and path.startswith(str(root) + os.sep) else path
        lines.append(f"{shown}: {why}")
    return lines
