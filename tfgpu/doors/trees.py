"""Directory trees walked and emptied without recursion and without following a link.

Python's own walkers recurse once per level (``os.walk`` and ``os.fwalk`` before 3.12 and 3.13,
``shutil.rmtree`` before 3.13), so a chain of a few thousand nested directories, which anyone can
make in a cache or an env, ends a walk in ``RecursionError``; ``os.fwalk`` also holds one open
directory per level, and runs out of descriptors on a deep enough chain. Here a walk keeps a list
of the directories still to finish and holds ONE directory open at a time:

* each directory is opened from the one above it (``openat`` with ``O_NOFOLLOW``) and checked to be
  the directory that was listed, so a directory swapped for a link while the walk runs is never
  entered, and every unlink is made relative to that open directory;
* going back up opens ``..`` of the open directory and checks it is the directory the walk came
  from: a directory moved elsewhere meanwhile stops the walk (nothing is deleted in a place it did
  not list);
* a directory on another file system (a mount point) is never entered.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

from tfgpu.doors import untrusted

_WALKED = untrusted.Kind("a directory being walked", 0, None, links=False)


def _open_directory(name: str | Path, at: int | None = None) -> int:
    """``name`` (in the open directory ``at``) opened as a directory, never through a link in its
    last component (``tfgpu.doors.untrusted.open_directory``); OSError when it cannot be."""
    try:
        return untrusted.open_directory(name, _WALKED, at=at)
    except untrusted.Unreadable as error:
        raise OSError(0, error.reason, str(name)) from None


class _Changed(Exception):
    """The directory at a name is no longer the one listed (swapped for a link, replaced)."""


def _identity(info: os.stat_result) -> tuple[int, int]:
    return info.st_dev, info.st_ino


def _open_below(parent: int, name: str, listed: os.stat_result, writable: bool) -> int:
    """The directory ``name`` in the open directory ``parent``, the very one ``listed``; with
    ``writable`` a directory the owner may not list or empty is made so first (it is about to go)."""
    try:
        fd = _open_directory(name, parent)
    except OSError:
        if not writable or listed.st_mode & stat.S_IRUSR:  # not for want of permission
            raise
        os.chmod(name, stat.S_IRWXU, dir_fd=parent)  # a name, not a descriptor: checked just below
        fd = _open_directory(name, parent)
    opened = os.fstat(fd)
    if _identity(opened) != _identity(listed):
        os.close(fd)
        raise _Changed(name)
    if writable and stat.S_IMODE(opened.st_mode) & stat.S_IRWXU != stat.S_IRWXU:
        os.fchmod(fd, stat.S_IMODE(opened.st_mode) | stat.S_IRWXU)
    return fd


def _names(fd: int) -> list[str]:
    try:
        return os.listdir(fd)
    except OSError:
        return []


def empty(
    root: Path,
    entry: Callable[[int, str, os.stat_result, Path], None],
    *,
    writable: bool = False,
) -> bool:
    """Walk ``root`` depth first and call ``entry(directory_fd, name, stat, path)`` for every entry
    that is not a directory (files, links, anything else; ``stat`` not following a link), then remove
    each directory below ``root`` that is left empty (``root`` itself stays). ``writable``: a
    directory that cannot be listed or emptied is made writable by its owner first. False when the
    walk stopped because a directory was moved while it ran. OSError when ``root`` is not a directory
    (a link to one included)."""
    current = _open_directory(root)
    top = os.fstat(current)
    if writable and stat.S_IMODE(top.st_mode) & stat.S_IRWXU != stat.S_IRWXU:
        os.fchmod(current, stat.S_IMODE(top.st_mode) | stat.S_IRWXU)
    # Each level: (its path, its identity, names not yet visited, its name in the level above).
    levels: list[tuple[Path, tuple[int, int], list[str], str]] = [(root, _identity(top), _names(current), "")]
    try:
        while levels:
            path, _, pending, name_above = levels[-1]
            if pending:
                name = pending.pop()
                try:
                    info = os.stat(name, dir_fd=current, follow_symlinks=False)
                except OSError:
                    continue
                if not stat.S_ISDIR(info.st_mode):
                    entry(current, name, info, path / name)
                    continue
                if info.st_dev != top.st_dev:
                    continue  # a mount point: another file system's files are not the walk's
                try:
                    below = _open_below(current, name, info, writable)
                except (OSError, _Changed):
                    continue
                os.close(current)
                current = below
                levels.append((path / name, _identity(info), _names(current), name))
                continue
            levels.pop()
            if not levels:
                return True
            above = _open_directory("..", current)
            os.close(current)
            current = above
            if _identity(os.fstat(current)) != levels[-1][1]:
                return False  # moved while the walk was below it: stop, delete nowhere unlisted
            with contextlib.suppress(OSError):
                os.rmdir(name_above, dir_fd=current)  # only when empty
        return True
    finally:
        os.close(current)


def delete(tree: Path, *, writable: bool = True) -> None:
    """Delete ``tree`` and everything in it: links are deleted, never followed; a directory the
    owner may not empty is made writable first (``writable``); another file system mounted inside
    is never entered (``tree`` then stays, and so does the mount). OSError (the one ``rmdir``
    of ``tree`` itself raised) when ``tree`` could not be deleted whole."""

    def unlink(directory: int, name: str, info: os.stat_result, path: Path) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name, dir_fd=directory)

    try:
        info = os.lstat(tree)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(info.st_mode):
        os.unlink(tree)
        return
    if not empty(tree, unlink, writable=writable):
        raise OSError(0, "a directory in it was moved while it was being deleted", str(tree))
    os.rmdir(tree)


def _listing(directory: int) -> tuple[list[str], list[str], list[str]]:
    """(directories, other names, the links among them) in the open ``directory``."""
    directories, others, links = [], [], []
    try:
        with os.scandir(directory) as entries:
            for entry in entries:
                try:
                    if entry.is_symlink():
                        links.append(entry.name)
                        others.append(entry.name)
                    elif entry.is_dir(follow_symlinks=False):
                        directories.append(entry.name)
                    else:
                        others.append(entry.name)
                except OSError:
                    others.append(entry.name)
    except OSError:
        pass
    return directories, others, links


def walk(root: Path) -> Iterator[tuple[Path, list[str], list[str], list[str]]]:
    """``(directory, directories, other names, links)`` for ``root`` and every directory below it,
    top down: links are never followed (a link to a directory is among the other names, and among
    ``links``), no depth recurses, and no depth is out of reach (each directory is opened from the
    one above it, so a path longer than the system's limit is listed too; callers use the names).
    Other file systems mounted inside are walked: what is there is looked at, never changed."""
    for path, _, directories, others, links in walk_identified(root):
        yield path, directories, others, links


def walk_identified(root: Path) -> Iterator[tuple[Path, tuple[int, int], list[str], list[str], list[str]]]:
    """:func:`walk`, each directory with its identity (device, inode) as opened: what a path cannot
    tell, a directory reached under another name (a bind mount of it inside the tree)."""
    try:
        current = _open_directory(root)
    except OSError:
        return
    levels: list[tuple[Path, tuple[int, int], list[str]]] = []
    path = root
    try:
        while True:
            directories, others, links = _listing(current)
            identity = _identity(os.fstat(current))
            yield path, identity, directories, others, links
            levels.append((path, identity, directories[::-1]))
            while True:
                here, _, pending = levels[-1]
                if pending:
                    name = pending.pop()
                    try:
                        below = _open_directory(name, current)
                    except OSError:
                        continue
                    os.close(current)
                    current, path = below, here / name
                    break
                levels.pop()
                if not levels:
                    return
                above = _open_directory("..", current)
                os.close(current)
                current = above
                if _identity(os.fstat(current)) != levels[-1][1]:
                    return  # moved while the walk was below it: what is listed from here is not root's
    finally:
        os.close(current)
