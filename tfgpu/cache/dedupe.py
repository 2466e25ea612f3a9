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


def _listed(record_text: str) -> list[tuple[str, str, int]]:
    """``(path, sha256 in RECORD's urlsafe base64, size)`` of every hashed file in a RECORD."""
    listed = []
    for line in record_text.splitlines():
        parts = line.rsplit(",", 2)
        if len(parts) == 3 and parts[1].startswith("sha256=") and parts[2].isdigit():
            listed.append((parts[0].strip('"'), parts[1].removeprefix("sha256="), int(parts[2])))
    return listed


def _digest(path: Path) -> str:
    hasher = hashlib.sha256()
    with untrusted.open_stream(path, untrusted.CACHE) as file:  # read in pieces, never whole
        for piece in iter(lambda: file.read(1 << 20), b""):
            hasher.update(piece)
    return base64.urlsafe_b64encode(hasher.digest()).rstrip(b"=").decode()


def _plain(path: Path, size: int) -> os.stat_result | None:
    """``path``'s stat when it is a regular file of ``size`` bytes, never through a link."""
    try:
        info = os.lstat(path)
    except OSError:
        return None
    return info if stat.S_ISREG(info.st_mode) and info.st_size == size else None


def _same(first: Path, second: Path, listed) -> list[tuple[Path, Path, os.stat_result]] | None:
    """``(first's file, second's file, second's stat)`` for every listed file, when both copies hold
    exactly what RECORD says; None otherwise."""
    record_file = next(first.glob("*.dist-info/RECORD"), None)
    pairs = []
    if record_file is not None:  # RECORD lists itself without a hash: its bytes were compared whole
        relative = record_file.relative_to(first).as_posix()
        listed = [*listed, (relative, None, record_file.lstat().st_size)]
    for relative, digest, size in listed:
        if relative.startswith("/") or ".." in Path(relative).parts:
            return None  # an entry outside the unpacked wheel: not this module's to touch
        one, two = first / relative, second / relative
        one_info, two_info = _plain(one, size), _plain(two, size)
        if one_info is None or two_info is None:
            return None
        if (one_info.st_dev, one_info.st_ino) != (two_info.st_dev, two_info.st_ino):
            if digest is not None and (_digest(one) != digest or _digest(two) != digest):
                return None
            pairs.append((one, two, two_info))
    return pairs


def _relink(keep: Path, name: Path) -> None:
    """``name`` becomes a hard link to ``keep`` (made beside it, renamed over it)."""
    partial = name.with_name(f".{name.name[:200]}.{os.getpid()}.tfgpu-tmp")
    try:
        os.link(keep, partial)
        os.replace(partial, name)
    finally:
        if os.path.lexists(partial):
            os.unlink(partial)


def one_copy(cache: Path, env: Path | None = None) -> Deduped:
    """Every wheel unpacked more than once in ``cache`` (the tool's own uv cache) kept once; the
    files of ``env`` (an env just built, before it is moved into place) that were links to a second
    copy are relinked to the first (``tfgpu.envs.writes.put_hardlink``)."""
    from tfgpu.cache.survey import _records

    copies: dict[tuple[str, bytes], list[Path]] = {}
    for record_file in _records(cache):
        try:
            text = untrusted.read_bytes(record_file, untrusted.CACHE)
        except untrusted.Unreadable:
            continue
        copies.setdefault((record_file.parent.name, text), []).append(record_file.parent.parent)
    files, size, moved = 0, 0, {}
    for (_, text), found in copies.items():
        if len(found) < 2:
            continue
        first, *others = sorted(found, key=lambda path: (os.lstat(path).st_mtime_ns, path.name))
        listed = _listed(text.decode("utf-8", "replace"))
        for other in others:
            pairs = _same(first, other, listed)
            for keep, name, info in pairs or ():
                _relink(keep, name)
                moved[(info.st_dev, info.st_ino)] = keep
                files, size = files + 1, size + info.st_size
    if env is not None and moved:
        _env_relinked(env, moved)
    return Deduped(files, size)


def _env_relinked(env: Path, moved: dict) -> None:
    from tfgpu.envs import writes

    for directory, _, files in os.walk(env):
        for name in files:
            path = Path(directory) / name
            try:
                info = os.lstat(path)
            except OSError:
                continue
            keep = moved.get((info.st_dev, info.st_ino)) if stat.S_ISREG(info.st_mode) else None
            if keep is not None:
                writes.put_hardlink(path, keep, env)
