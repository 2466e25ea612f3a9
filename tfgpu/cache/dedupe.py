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
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import hashlib
import os
import stat
from pathlib import Path

from tfgpu import untrusted
from tfgpu.records import record


@record
class Deduped:
    """What :func:`one_copy` did: files of a second copy made links to the first's, and their bytes
    (freed once no older env still holds the second copy's files: the env passed in is relinked)."""

    files: int = 0
    bytes: int = 0


def _listed(record_text: str) -> dict[str, tuple[str, int]] | None:
    """``{path: (sha256 in RECORD's urlsafe base64, size)}`` of every hashed file in a RECORD, each
    path once (a RECORD listing one big file a million times is hashed once); None when it lists
    one path twice with different hashes or sizes (no wheel's RECORD does)."""
    listed: dict[str, tuple[str, int]] = {}
    for line in record_text.splitlines():
        parts = line.rsplit(",", 2)
        if len(parts) == 3 and parts[1].startswith("sha256=") and parts[2].isdigit() and len(parts[2]) < 20:
            path, entry = parts[0].strip('"'), (parts[1].removeprefix("sha256="), int(parts[2]))
            if listed.setdefault(path, entry) != entry:
                return None
    return listed


def _digest(path: Path, info: os.stat_result) -> str | None:
    """The sha256 of the file ``path`` when it is still the one ``info`` describes (the file read is
    the file checked: one renamed over it in between is not hashed for it); None otherwise."""
    hasher = hashlib.sha256()
    try:
        with untrusted.open_stream(path, untrusted.CACHE) as file:  # read in pieces, never whole
            opened = os.fstat(file.fileno())
            if (opened.st_dev, opened.st_ino) != (info.st_dev, info.st_ino):
                return None
            for piece in iter(lambda: file.read(1 << 20), b""):
                hasher.update(piece)
    except (OSError, untrusted.Unreadable):
        return None
    return _b64(hasher.digest())


def _b64(digest: bytes) -> str:
    """A sha256 digest as RECORD writes it (urlsafe base64, no padding)."""
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def _plain(path: Path, size: int) -> os.stat_result | None:
    """``path``'s stat when it is a regular file of ``size`` bytes, never through a link."""
    try:
        info = os.lstat(path)
    except OSError:
        return None
    return info if stat.S_ISREG(info.st_mode) and info.st_size == size else None


def _within(copy: Path, relative: str, real: set[str]) -> bool:
    """Whether every directory from ``copy`` down to ``relative``'s file is a real directory (no
    link on the way: ``pkg -> /home/user/project`` would carry a link or a read out of the cache).
    ``real``: the directories already checked."""
    parts = Path(relative).parts
    for depth in range(1, len(parts)):
        directory = "/".join(parts[:depth])
        if directory in real:
            continue
        try:
            if not stat.S_ISDIR(os.lstat(copy / directory).st_mode):
                return False
        except OSError:
            return False
        real.add(directory)
    return True


def _same(
    first: Path, second: Path, dist_info: str, listed, record_digest: str
) -> list[tuple[Path, os.stat_result, Path, os.stat_result]] | None:
    """``(first's file, its stat, second's file, its stat)`` for every listed file, when both copies
    hold exactly what RECORD says, each file reached without a link on the way; None otherwise."""
    if listed is None:
        return None
    record = f"{dist_info}/RECORD"
    try:  # RECORD lists itself without a hash: both copies' are hashed as the whole file read
        listed = {**listed, record: (record_digest, os.lstat(first / record).st_size)}
    except OSError:
        return None
    pairs, real_first, real_second = [], set(), set()
    for relative, (digest, size) in listed.items():
        parts = Path(relative).parts
        if not parts or relative.startswith("/") or ".." in parts or "\0" in relative:
            return None  # an entry outside the unpacked wheel: not this module's to touch
        if not (_within(first, relative, real_first) and _within(second, relative, real_second)):
            return None
        one, two = first / relative, second / relative
        one_info, two_info = _plain(one, size), _plain(two, size)
        if one_info is None or two_info is None:
            return None
        if (one_info.st_dev, one_info.st_ino) != (two_info.st_dev, two_info.st_ino):
            if digest is not None and (_digest(one, one_info) != digest or _digest(two, two_info) != digest):
                return None
            pairs.append((one, one_info, two, two_info))
    return pairs


def _same_file(path: Path, info: os.stat_result) -> bool:
    try:
        now = os.lstat(path)
    except OSError:
        return False
    return (now.st_dev, now.st_ino) == (info.st_dev, info.st_ino)


def _relink(keep: Path, keep_info: os.stat_result, name: Path, name_info: os.stat_result, partial: Path) -> bool:
    """``name`` becomes a hard link to ``keep`` (made as ``partial``, in the scratch directory
    outside every unpacked wheel, renamed over ``name``), only while both are still the files that
    were checked; True when it did. A file swapped in since, or a link refused, leaves ``name``."""
    try:
        os.link(keep, partial, follow_symlinks=False)
        if not (_same_file(partial, keep_info) and _same_file(name, name_info)):
            return False
        os.replace(partial, name)
        return True
    except OSError:
        return False
    finally:
        with contextlib.suppress(OSError):
            os.unlink(partial)


SCRATCH = ".tmp_tfgpu_dedupe"
"""The directory in uv's cache where the dedupe makes each link before renaming it into place: a
run killed between the two leaves its link there, never inside an unpacked wheel (uv links every
file of one into each env it installs it into); the next run empties it. Named as uv names its own
temporary directories, so the cache still holds only entries uv makes (``tfgpu.cache.uvdir``)."""


@contextlib.contextmanager
def _scratch(cache: Path):
    """The scratch directory, held (flock) by this run alone and emptied of what a killed run left;
    None while another run holds it (that run dedupes; this one leaves the cache as it is)."""
    scratch = cache / SCRATCH
    try:
        scratch.mkdir(exist_ok=True)
        if not stat.S_ISDIR(os.lstat(scratch).st_mode):
            raise NotADirectoryError(str(scratch))
        fd = os.open(scratch / ".lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
    except OSError:
        yield None
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            yield None
            return
        with os.scandir(scratch) as entries:
            for entry in entries:
                if entry.name != ".lock" and not entry.is_dir(follow_symlinks=False):
                    with contextlib.suppress(OSError):
                        os.unlink(entry.path)
        yield scratch
    finally:
        os.close(fd)


def _age(path: Path) -> tuple[int, str]:
    try:
        return os.lstat(path).st_mtime_ns, path.name
    except OSError:
        return -1, path.name


def one_copy(cache: Path, env: Path | None = None) -> Deduped:
    """Every wheel unpacked more than once in ``cache`` (the tool's own uv cache) kept once; the
    files of ``env`` (an env just built, before it is moved into place) that were links to a second
    copy are relinked to the first (``tfgpu.envs.writes.put_hardlink``)."""
    from tfgpu.cache.survey import _records

    # Grouped by each RECORD's hash, never its bytes: a cache of many large RECORDs is held one at
    # a time. Each copy's RECORD is hashed again, as a listed file, before anything is linked.
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
    files, size, moved = 0, 0, {}
    if not twice:
        return Deduped()
    with _scratch(cache) as scratch:
        if scratch is None:
            return Deduped()
        for (dist_info, record_digest), found in twice.items():
            first, *others = sorted(found, key=_age)
            try:
                text = untrusted.read_bytes(first / dist_info / "RECORD", untrusted.CACHE)
            except untrusted.Unreadable:
                continue
            if _b64(hashlib.sha256(text).digest()) != record_digest:
                continue  # changed since it was read: left as it is
            listed = _listed(text.decode("utf-8", "replace"))
            del text
            for other in others:
                pairs = _same(first, other, dist_info, listed, record_digest)
                for keep, keep_info, name, info in pairs or ():
                    if _relink(keep, keep_info, name, info, scratch / f"{os.getpid()}.{files}"):
                        moved[(info.st_dev, info.st_ino)] = (keep, keep_info)
                        files, size = files + 1, size + info.st_size
        if env is not None and moved:
            _env_relinked(env, moved, scratch)
    return Deduped(files, size)


def _env_relinked(env: Path, moved: dict, scratch: Path) -> None:
    """The files of ``env`` that are links to a second copy's file become links to the kept one,
    linked from a name of the tool's own in ``scratch`` proved to be the file that was checked (a
    file swapped in at the kept name since is never linked into the env)."""
    from tfgpu.envs import writes

    held: dict[Path, Path | None] = {}
    try:
        for directory, _, files in os.walk(env):
            for name in files:
                path = Path(directory) / name
                try:
                    info = os.lstat(path)
                except OSError:
                    continue
                found = moved.get((info.st_dev, info.st_ino)) if stat.S_ISREG(info.st_mode) else None
                if found is None:
                    continue
                keep, keep_info = found
                if keep not in held:
                    held[keep] = _held(keep, keep_info, scratch / f"{os.getpid()}.env.{len(held)}")
                if held[keep] is not None:
                    writes.put_hardlink(path, held[keep], env)
    finally:
        for name in held.values():
            if name is not None:
                with contextlib.suppress(OSError):
                    os.unlink(name)


def _held(keep: Path, keep_info: os.stat_result, name: Path) -> Path | None:
    """``name``, a new link to ``keep`` while it is still the file checked; None otherwise."""
    try:
        os.link(keep, name, follow_symlinks=False)
    except OSError:
        return None
    if _same_file(name, keep_info):
        return name
    with contextlib.suppress(OSError):
        os.unlink(name)
    return None
