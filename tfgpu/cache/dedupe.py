"""One copy on disk of a wheel that uv's cache holds unpacked twice.

uv keeps each source's wheels apart: a wheel installed from the index and the same wheel installed
from a ``--find-links`` directory (a bundle, an offline install) are two entries under
``wheels-v*/index/<source>/``, each pointing at its own unpacked copy under ``archive-v0/`` (uv
0.13, measured: an 8 MiB wheel took 8 MiB of cache from the index, 16 MiB once also installed from a
directory). The env built from the second source hard-links the second copy's files.

After such an install (``tfgpu.installers.pip``), :func:`one_copy` makes the second copy's files
hard links to the first's, and the new env's files too, so both sources' entries and every env
share one inode per file, and the second copy's bytes are free. Only where the two are proved the
same: the same ``RECORD`` (byte for byte), and every file it lists, in both copies, a regular file
of the size and sha256 ``RECORD`` gives. A file that differs, is missing, or is not a plain file
leaves that copy as uv made it. Only the tool's own uv cache is changed, never the user's
(``tfgpu.cache.uvdir``: the caller passes the tool's), and uv still finds every entry where it
left it: only which inode a name points to changes.

The cache can change while this runs (another process of the user, a second tfgpu run, uv), so
nothing is done by path once the cache is open: the cache, each copy and each directory in a copy
is opened once, without following a link (``O_DIRECTORY|O_NOFOLLOW``), and every check, hash, link
and rename is made relative to those descriptors. A directory swapped for a link after it was
opened changes nothing done through it; one swapped before is refused. A name is replaced only by
the inode that was hashed (``fstat`` of the descriptor hashed, ``lstat`` of the new link: the same
``(st_dev, st_ino)``, size and mtime), and only while it is still the file that was checked.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import hashlib
import os
import stat
import time
from pathlib import Path

from tfgpu.cache.survey import _records
from tfgpu.doors import owner, trees, untrusted
from tfgpu.envs import writes
from tfgpu.records import record


@record
class Deduped:
    """What :func:`one_copy` did: files of a second copy made links to the first's, and their bytes
    (freed once no older env still holds the second copy's files: the env passed in is relinked)."""

    files: int = 0
    bytes: int = 0


DEPTH = 64
"""The deepest path a RECORD entry may name (no wheel comes near it): each directory on the way to a
file is held open while it is checked, so a deeper one leaves the copy as it is."""

SCRATCH = ".tmp_tfgpu_dedupe"
"""The directory in uv's cache where the dedupe makes each link before renaming it into place: a
run killed between the two leaves its link there, never inside an unpacked wheel (uv links every
file of one into each env it installs it into); the next run empties it. Named as uv names its own
temporary directories, so the cache still holds only entries uv makes (``tfgpu.cache.uvdir``)."""

LOCK = ".lock"
"""The file in :data:`SCRATCH` a dedupe holds (flock) for its whole run: one dedupe of a cache at a
time, and the kernel lets go of it when the run dies, SIGKILL included."""

WAIT = 300.0
"""How long a dedupe waits for another run's dedupe of the same cache (seconds; a TensorFlow-sized
wheel takes seconds) before it leaves the cache as it is."""


def _listed(record_text: str) -> dict[str, tuple[str, int]] | None:
    """``{path: (sha256 in RECORD's urlsafe base64, size)}`` of every hashed file in a RECORD, each
    path once (a RECORD listing one big file a million times is hashed once); None when it lists
    one path twice with different hashes or sizes (no wheel's RECORD does)."""
    listed: dict[str, tuple[str, int]] = {}
    for line in record_text.splitlines():
        parts = line.rsplit(",", 2)
        # isascii: str.isdigit() also says yes to "²", which int() refuses (a crash on a wheel's RECORD).
        size = parts[2] if len(parts) == 3 else ""
        if parts[1:2] and parts[1].startswith("sha256=") and size.isascii() and size.isdigit() and len(size) < 20:
            path, entry = parts[0].strip('"'), (parts[1].removeprefix("sha256="), int(parts[2]))
            if listed.setdefault(path, entry) != entry:
                return None
    return listed


def _b64(digest: bytes) -> str:
    """A sha256 digest as RECORD writes it (urlsafe base64, no padding)."""
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def _lstat(directory: int, name: str) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=directory, follow_symlinks=False)
    except OSError:
        return None


class _Tree:
    """One unpacked copy, each directory in it opened from the one above without following a link,
    so the file checked and the file linked are named in the same directory whatever is renamed or
    swapped by path meanwhile. Only the chain down to the directory in use is held open: RECORD's
    paths are visited sorted, so a wheel of thousands of directories holds a few descriptors."""

    def __init__(self, root: int) -> None:
        self.root = root
        self.chain: list[tuple[str, int]] = []

    def at(self, parts: tuple[str, ...]) -> int | None:
        """The open directory ``parts`` below the copy's top; None when one on the way is not a
        real directory (a link, a file, gone)."""
        same = 0
        while same < min(len(self.chain), len(parts)) and self.chain[same][0] == parts[same]:
            same += 1
        self._close(same)
        for name in parts[same:]:
            above = self.chain[-1][1] if self.chain else self.root
            try:
                self.chain.append((name, untrusted.open_directory(name, untrusted.CACHE, at=above)))
            except untrusted.Unreadable:
                return None
        return self.chain[-1][1] if self.chain else self.root

    def _close(self, keep: int) -> None:
        for _, fd in self.chain[keep:]:
            os.close(fd)
        del self.chain[keep:]

    def close(self) -> None:
        self._close(0)
        os.close(self.root)


@contextlib.contextmanager
def _opened(top: int, parts: tuple[str, ...]):
    """The copy ``parts`` below the open cache ``top`` as a :class:`_Tree`; None when a directory on
    the way is not a real one (a copy swapped for a link since the walk found it)."""
    fd: int | None = top
    try:
        for name in parts:
            above, fd = fd, untrusted.open_directory(name, untrusted.CACHE, at=fd)
            if above is not None and above != top:
                os.close(above)
    except untrusted.Unreadable:
        if fd is not None and fd != top:
            os.close(fd)
        fd = None
    if fd is None or fd == top:  # not there, or no part at all: never the cache itself as a copy
        yield None
        return
    tree = _Tree(fd)
    try:
        yield tree
    finally:
        tree.close()


def _record_of(copy: _Tree, dist_info: str, record_digest: str) -> dict[tuple[str, ...], tuple[str, int]] | None:
    """What the copy's RECORD lists, by path parts, itself included (RECORD lists itself without a
    hash: its bytes are the ones the copies were grouped by); None when it is no longer those bytes
    or lists a path outside the unpacked wheel."""
    directory = copy.at((dist_info,))
    if directory is None:
        return None
    try:
        text = untrusted.read_bytes("RECORD", untrusted.CACHE, at=directory)
    except untrusted.Unreadable:
        return None
    if _b64(hashlib.sha256(text).digest()) != record_digest:
        return None  # changed since it was read: left as it is
    listed = _listed(text.decode("utf-8", "replace"))
    if listed is None:
        return None
    entries: dict[tuple[str, ...], tuple[str, int]] = {(dist_info, "RECORD"): (record_digest, len(text))}
    for relative, entry in listed.items():
        parts = Path(relative).parts
        if not parts or relative.startswith("/") or ".." in parts or "\0" in relative or len(parts) > DEPTH:
            return None  # an entry outside the unpacked wheel: not this module's to touch
        entries.setdefault(parts, entry)
    return entries


def _plain(directory: int, name: str, size: int) -> os.stat_result | None:
    """The stat of ``name`` in ``directory`` when it is a regular file of ``size`` bytes (never a
    link) that is this user's alone: the kept inode becomes a name in every env that held the other,
    so one another user owns, or may write, would let them change those envs after every check."""
    info = _lstat(directory, name)
    if info is None or not stat.S_ISREG(info.st_mode) or info.st_size != size:
        return None
    return info if owner.only_mine(info, own_group=True) else None


def _digest(directory: int, name: str, info: os.stat_result) -> str | None:
    """The sha256 of ``name`` in ``directory`` when the file read is the file ``info`` describes,
    from its open to its last byte (one renamed over it, or written to, is not hashed for it)."""
    hasher = hashlib.sha256()
    try:
        with untrusted.open_stream(name, untrusted.CACHE, at=directory) as file:  # in pieces, never whole
            if trees.file_identity(os.fstat(file.fileno())) != trees.file_identity(info):
                return None
            for piece in iter(lambda: file.read(1 << 20), b""):
                hasher.update(piece)
            if trees.file_identity(os.fstat(file.fileno())) != trees.file_identity(info):
                return None
    except (OSError, untrusted.Unreadable):
        return None
    return _b64(hasher.digest())


@record
class _Twin:
    """A listed file held by two inodes: the kept copy's and the second copy's, as each was hashed."""

    parts: tuple
    keep: tuple
    name: tuple
    size: int


def _same(first: _Tree, second: _Tree, listed: dict | None) -> list[_Twin] | None:
    """Each listed file that both copies hold as two inodes of the bytes RECORD gives, when both
    copies hold exactly what RECORD says, each file reached without a link on the way; None otherwise."""
    if not listed:
        return None
    twins = []
    for parts, (digest, size) in sorted(listed.items()):
        one_dir, two_dir = first.at(parts[:-1]), second.at(parts[:-1])
        if one_dir is None or two_dir is None:
            return None
        one, two = _plain(one_dir, parts[-1], size), _plain(two_dir, parts[-1], size)
        if one is None or two is None:
            return None
        if stat.S_IMODE(one.st_mode) != stat.S_IMODE(two.st_mode):
            return None  # a link takes the kept inode's mode: an executable would lose its x bit, or gain setuid
        if (one.st_dev, one.st_ino) != (two.st_dev, two.st_ino):
            if _digest(one_dir, parts[-1], one) != digest or _digest(two_dir, parts[-1], two) != digest:
                return None
            twins.append(_Twin(parts, trees.file_identity(one), trees.file_identity(two), size))
    return twins


def _relink(first: _Tree, second: _Tree, twin: _Twin, scratch: int, partial: str, hold: str | None) -> bool:
    """The second copy's name becomes a hard link to the kept file: linked (never through a link)
    from the kept copy's directory into ``scratch`` as ``partial``, proved there to be the inode that
    was hashed, and renamed over the name in the second copy's directory while that name is still
    the file that was checked (``tfgpu.doors.trees.link_in``); True when it did. ``hold``: a second link
    to it left in ``scratch``, for the env. A file swapped in at either name leaves the copy as it is."""
    keep_dir, name_dir = first.at(twin.parts[:-1]), second.at(twin.parts[:-1])
    if keep_dir is None or name_dir is None:
        return False
    name = twin.parts[-1]
    try:
        return trees.link_in(
            (keep_dir, name), twin.keep, (scratch, partial), (name_dir, name), target_is=twin.name, also=hold
        )
    except OSError:
        return False


def _still(directory: int, name: str, fd: int) -> bool:
    """Whether ``name`` in ``directory`` is still the file or directory open as ``fd``."""
    now, held = _lstat(directory, name), os.fstat(fd)
    return now is not None and (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino)


def _lock(top: int, deadline: float) -> tuple[int, int] | None:
    """The scratch directory and its lock, opened in the open cache ``top`` and locked (flock) by
    this run, waiting while another run holds it (until ``deadline``); None when it cannot be."""
    try:
        os.mkdir(SCRATCH, 0o755, dir_fd=top)
    except FileExistsError:
        pass
    except OSError:
        return None
    try:
        scratch = untrusted.open_directory(SCRATCH, untrusted.CACHE, at=top)
    except untrusted.Unreadable:
        return None
    try:
        lock = os.open(
            LOCK, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o644, dir_fd=scratch
        )
    except OSError:
        os.close(scratch)
        return None
    while True:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return scratch, lock
        except BlockingIOError:
            if time.monotonic() > deadline:
                break
            time.sleep(0.1)
        except OSError:
            break
    os.close(lock)
    os.close(scratch)
    return None


@contextlib.contextmanager
def _held(cache: Path):
    """``(cache, scratch)``, both open, the scratch directory held by this run alone and emptied of
    what a killed run left; None when the cache or the scratch directory is not a real directory, or
    another run holds it past :data:`WAIT`. Once locked, both names must still be what was opened
    (as ``tfgpu.envs.txn.TargetLock`` checks): a scratch directory or lock another run replaced
    while this one waited would let two runs in at once."""
    try:
        top = untrusted.open_directory(cache, untrusted.CACHE)
    except untrusted.Unreadable:
        yield None
        return
    held, deadline = None, time.monotonic() + WAIT
    try:
        for _ in range(10):
            held = _lock(top, deadline)
            if held is None or (_still(top, SCRATCH, held[0]) and _still(held[0], LOCK, held[1])):
                break
            os.close(held[1])
            os.close(held[0])
            held = None
        if held is None:
            yield None
            return
        leftovers = []
        with contextlib.suppress(OSError), os.scandir(held[0]) as entries:
            leftovers = [e.name for e in entries if e.name != LOCK and not e.is_dir(follow_symlinks=False)]
        for name in leftovers:
            trees.unlink(name, at=held[0], strict=False)
        yield top, held[0]
    finally:
        if held is not None:
            os.close(held[1])
            os.close(held[0])
        os.close(top)


def _age(path: Path) -> tuple[int, str]:
    try:
        return os.lstat(path).st_mtime_ns, path.name
    except OSError:
        return -1, path.name


def one_copy(cache: Path, env: Path | None = None) -> Deduped:
    """Every wheel unpacked more than once in ``cache`` (the tool's own uv cache) kept once; the
    files of ``env`` (an env just built, before it is moved into place) that were links to a second
    copy are relinked to the first (``tfgpu.envs.writes.put_hardlink``). Another dedupe of the same
    cache is waited for, never run alongside."""
    # Grouped by each RECORD's hash, never its bytes: a cache of many large RECORDs is held one at
    # a time. Each copy's RECORD is read again through the open copy, and hashed as a listed file.
    copies: dict[tuple[str, str], list[Path]] = {}
    for record_file in _records(cache):
        try:
            text = untrusted.read_bytes(record_file, untrusted.CACHE)
        except untrusted.Unreadable:
            continue
        key = (record_file.parent.name, _b64(hashlib.sha256(text).digest()))
        copies.setdefault(key, []).append(record_file.parent.parent)
        del text
    twice = {key: found for key, found in copies.items() if len(found) > 1}
    if not twice:
        return Deduped()
    files, size, moved = 0, 0, {}
    with _held(cache) as held:
        if held is None:
            return Deduped()
        top, scratch = held
        try:
            for (dist_info, record_digest), found in twice.items():
                first, *others = sorted(found, key=_age)
                with _opened(top, first.relative_to(cache).parts) as kept:
                    listed = kept and _record_of(kept, dist_info, record_digest)
                    for other in others if listed else ():
                        with _opened(top, other.relative_to(cache).parts) as copy:
                            for twin in (copy and _same(kept, copy, listed)) or ():
                                hold = f"{os.getpid()}.env.{files}" if env is not None else None
                                if _relink(kept, copy, twin, scratch, f"{os.getpid()}.{files}", hold):
                                    moved[twin.name[:2]] = (hold, twin.keep)
                                    files, size = files + 1, size + twin.size
            if env is not None and moved:
                _env_relinked(env, moved, scratch)
        finally:
            for hold, _ in moved.values():
                if hold is not None:
                    trees.unlink(hold, at=scratch, strict=False)
    return Deduped(files, size)


def _env_relinked(env: Path, moved: dict, scratch: int) -> None:
    """The files of ``env`` that are links to a second copy's file become links to the kept one,
    linked from the tool's own name of it in ``scratch``, made when that file was proved the one
    hashed, and proved so again when the env's link is made (a file swapped in at that name since
    is never linked into the env)."""
    for directory, _, files, _ in trees.walk(env):  # no recursion on depth
        for name in files:
            path = Path(directory) / name
            try:
                info = os.lstat(path)
            except OSError:
                continue
            found = moved.get((info.st_dev, info.st_ino)) if stat.S_ISREG(info.st_mode) else None
            if found is not None and found[0] is not None:
                writes.put_hardlink(path, (scratch, found[0]), found[1], env)
