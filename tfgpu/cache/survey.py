"""What the tool's cache holds, by kind, and what ``cache clean`` and ``cache prune`` would free.

Sizes count each file once however many hard links it has (uv and the bytecode store hard-link
into envs), and never follow a symbolic link. A file an env also links stays on disk while that
env exists, so cleaning frees only what no env holds: ``linked`` counts the files with a link outside the
cache, ``frees`` the rest.
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

from tfgpu.data import parsed_cache_file
from tfgpu.doors import untrusted
from tfgpu.records import factory, record

KINDS: dict[str, tuple[str, str]] = {
    "uv": ("uv packages (the tool's own uv cache)", "`uv cache prune`: entries no install refers to"),
    "pyc": ("bytecode shared between envs", "files no env links any more"),
    "data": ("parsed data tables", "tables parsed for data that has since changed"),
    "pypi": ("release facts from PyPI (update-data)", "kept: `update-data --offline` reads them"),
    "downloads": ("NVIDIA downloads for system mode", "partial downloads (*.part)"),
    "conda": ("conda packages and channel indexes", "kept: conda envs link these packages"),
}
"""Each kind of cache under the cache root: what it holds, and what ``prune`` removes of it."""
OWN_FILES = ("CACHEDIR.TAG", ".tfgpu-cache.lock")
"""Files of the cache root itself (the cache tag, the lock cache commands hold)."""


@record(frozen=False)
class Usage:
    """The files under one directory, each counted once."""

    files: int = 0
    bytes: int = 0
    linked: int = 0
    """Bytes of files that also have a hard link outside the directory (an env holds them)."""
    links_out: list = factory(list)
    """Symbolic links found (never followed; ``clean`` leaves them and what they point at)."""

    @property
    def frees(self) -> int:
        return self.bytes - self.linked


@record
class Kind:
    """One kind of cache: where, how big, what clean and prune would free."""

    kind: str
    path: Path
    usage: Usage
    shared: bool = False
    """The user's own uv cache: ``clean`` leaves it, ``prune`` runs uv's own prune on it."""
    prune_frees: int | None = None
    """Bytes ``prune`` would free; None where the tool cannot know ahead (uv decides)."""
    note: str = ""
    twice: dict = factory(dict)
    """uv's cache: {wheel: bytes of its extra unpacked copies} (see :func:`unpacked_twice`)."""

    @property
    def prune_says(self) -> str:
        """What ``prune`` removes of this kind (or keeps, and why)."""
        prunes = KINDS.get(self.kind, ("", ""))[1]
        if self.kind == "conda" and not self.usage.linked:
            # "conda envs link these packages" only while one does (a file with a link outside the cache).
            prunes = "kept: no env links these packages now; the next conda create reuses them"
        return prunes

    @property
    def what(self) -> str:
        """What this kind holds, in words (``cache info``'s first column)."""
        if self.shared:
            return "uv packages (your own uv cache, reused by the tool)"
        return KINDS.get(self.kind, ("", ""))[0]

    @property
    def clean_frees(self) -> int:
        """Bytes ``clean`` would free (none of the user's own uv cache: clean leaves it)."""
        return 0 if self.shared else self.usage.frees

    def to_dict(self) -> dict:
        return {
            "kind": self.kind,
            "what": self.what,
            "path": str(self.path),
            "exists": self.path.is_dir() and not self.path.is_symlink(),
            "files": self.usage.files,
            "bytes": self.usage.bytes,
            "linked_bytes": self.usage.linked,
            "shared": self.shared,
            "clean_frees": self.clean_frees,
            "prune_frees": self.prune_frees,
            "prune_removes": self.prune_says,
            "links_out": [str(link) for link in self.usage.links_out],
            "note": self.note,
            **({"unpacked_twice": self.twice} if self.kind == "uv" else {}),
        }


def _files(root: Path):
    """(path, stat) of every regular file under ``root`` and the symbolic links met, never followed."""
    # Directories wait as strings: a Path per directory parses its whole path again, which cost
    # seconds (quadratic in the depth) on a chain a few thousand directories deep.
    files, links, stack = [], [], [os.fspath(root)]
    while stack:
        directory = stack.pop()
        try:
            entries = list(os.scandir(directory))
        except OSError:
            continue
        for entry in entries:
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISLNK(info.st_mode):
                links.append(Path(entry.path))
            elif stat.S_ISDIR(info.st_mode):
                stack.append(entry.path)
            elif stat.S_ISREG(info.st_mode):
                files.append((Path(entry.path), info))
    return files, links


def held_outside(root: Path) -> set[tuple[int, int]]:
    """The files under ``root`` that have a hard link outside it (an env's): the store's own names
    for one file (the bytecode store keeps a file under two keys) do not count."""
    return _outside(_files(root)[0])


def _outside(files) -> set[tuple[int, int]]:
    names: dict[tuple[int, int], int] = {}
    for _, info in files:
        names[(info.st_dev, info.st_ino)] = names.get((info.st_dev, info.st_ino), 0) + 1
    return {(info.st_dev, info.st_ino) for _, info in files if info.st_nlink > names[(info.st_dev, info.st_ino)]}


def usage(root: Path, keep=None, walked=None) -> Usage:
    """The files under ``root``, each inode once, symbolic links not followed (``keep``: a test of
    a path; the files it accepts are counted, as a prune would leave the others; ``walked``: what
    :func:`_files` found under ``root``, so that a second count walks no tree again)."""
    found, seen = Usage(), set()
    files, links = _files(root) if walked is None else walked
    found.links_out = list(links)
    outside = _outside(files) if files else set()
    for path, info in files:
        key = (info.st_dev, info.st_ino)
        if key in seen or (keep is not None and not keep(path, info)):
            continue
        seen.add(key)
        size = info.st_blocks * 512
        found.files += 1
        found.bytes += size
        if key in outside:
            found.linked += size
    return found


def prunable(kind: str, root: Path):
    """The test of a file ``prune`` removes from ``kind`` (None: prune keeps it all, or uv decides)."""
    if kind == "pyc":
        # A stored .pyc with one link is in no env. The markers (pyc/envs/) say which releases
        # filled the store: they go only when stored files do (``cleaning``), so that the next env
        # of such a release is compiled by uv rather than found missing in the store.
        outside = held_outside(root)
        return lambda path, info: (info.st_dev, info.st_ino) not in outside and path.parent.name != "envs"
    if kind == "data":
        current = parsed_cache_file().name
        return lambda path, info: path.name != current
    if kind == "downloads":
        return lambda path, info: path.name.endswith(".part")
    return None


def unpacked_twice(cache: Path) -> dict[str, int]:
    """The wheels uv's cache holds unpacked more than once, and the bytes of the extra copies.

    uv keeps each source's wheels apart (the index, each ``--find-links`` directory), each with its
    own unpacked copy: the same wheel installed from two sources is on disk twice. Two copies are
    the same wheel when their ``RECORD`` files (every file's hash) are byte for byte the same."""

    copies: dict[tuple[str, str], list[Path]] = {}
    for record_file in _records(cache):
        try:
            digest = hashlib.sha256(untrusted.read_bytes(record_file, untrusted.CACHE)).hexdigest()
        except untrusted.Unreadable:
            continue
        copies.setdefault((record_file.parent.name.removesuffix(".dist-info"), digest), []).append(
            record_file.parent.parent
        )
    twice = {}
    for (name, _), found in sorted(copies.items()):
        first, *others = sorted(found)
        if not others:
            continue
        # A copy whose files are links to the first's (``tfgpu.cache.dedupe``) costs nothing more.
        held = {(info.st_dev, info.st_ino) for _, info in _files(first)[0]}
        extra, seen = 0, set(held)
        for copy in others:
            for _, info in _files(copy)[0]:
                if (info.st_dev, info.st_ino) not in seen:
                    seen.add((info.st_dev, info.st_ino))
                    extra += info.st_size
        if extra:
            twice[name] = extra
    return twice


def _directories(path: Path, test=lambda name: True) -> list[Path]:
    """The directories in ``path`` whose name passes ``test``, links never followed."""
    try:
        entries = list(os.scandir(path))
    except OSError:
        return []
    return [Path(entry.path) for entry in entries if test(entry.name) and entry.is_dir(follow_symlinks=False)]


def _records(cache: Path):
    """``archive-v*/*/*.dist-info/RECORD`` under uv's cache, walked without following a link
    (pathlib's glob follows them: a link in the cache would have it size the disk it points to)."""
    if cache.is_symlink():
        return
    for archive in _directories(cache, lambda name: name.startswith("archive-v")):
        for unpacked in _directories(archive):
            for dist_info in _directories(unpacked, lambda name: name.endswith(".dist-info")):
                yield dist_info / "RECORD"


def survey(root: Path, uv_cache) -> list[Kind]:
    """Every kind under ``root`` (the tool's cache root), and the user's uv cache when the tool
    reuses it (``uv_cache``: a ``tfgpu.cache.UvCache``)."""
    kinds = []
    for kind in KINDS:
        path = root / kind
        note, walked = "", None
        if path.is_symlink():
            found = Usage(links_out=[path])
            note = f"a link to {os.readlink(path)}: not the tool's, left alone"  # shown escaped by the renderer
        else:
            # One walk for both counts: a tree a few thousand directories deep took seconds a walk.
            walked = _files(path)
            found = usage(path, walked=walked)
        test = prunable(kind, path)
        frees = None if kind == "uv" else 0
        if test is not None and not path.is_symlink():
            removed = usage(path, keep=test, walked=walked)
            frees = removed.frees
        twice = unpacked_twice(path) if kind == "uv" and not path.is_symlink() else {}
        kinds.append(Kind(kind, path, found, prune_frees=frees, note=note, twice=twice))
    if uv_cache.shared:
        kinds.append(
            Kind(
                "uv",
                uv_cache.path,
                usage(uv_cache.path),
                shared=True,
                note="`cache clean` leaves it; `uv cache clean` empties it",
                twice=unpacked_twice(uv_cache.path),
            )
        )
    return kinds
