"""Directory trees walked and emptied without recursion and without following a link, and the one
set of calls that change a name on disk (delete, rename, link) for the whole tool.

Every unlink, rmdir, rename and link the tool makes goes through the primitives at the end of this
module (``tests/test_doors_envwrite.py`` fails on one made anywhere else, bar a short list of
exceptions, each with its reason). Each takes the directory it works in as an open descriptor
(``at``; None: the working directory, for a path), never follows a link at the name it changes,
and raises ``OSError`` as the system call does: what a caller makes of a failure (a typed error,
a skipped file) is its policy. The env-write door (``tfgpu.envs.writes``) checks an env's paths and
types the errors on top of them; the cache's cleaning and dedupe choose what to delete or relink
and call them.

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
import errno
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
        _make_listable(parent, name, listed)
        fd = _open_directory(name, parent)
    opened = os.fstat(fd)
    if _identity(opened) != _identity(listed):
        os.close(fd)
        raise _Changed(name)
    if writable and stat.S_IMODE(opened.st_mode) & stat.S_IRWXU != stat.S_IRWXU:
        os.fchmod(fd, stat.S_IMODE(opened.st_mode) | stat.S_IRWXU)
    return fd


def _make_listable(parent: int, name: str, listed: os.stat_result) -> None:
    """``chmod u+rwx`` the directory ``name`` in ``parent`` only while it is the one ``listed``:
    ``chmod`` through a name follows a link put there since the listing (and Linux has no
    ``lchmod``), so the mode is changed through a path-only descriptor opened without following
    one and proved to be that directory. A name swapped meanwhile raises :class:`_Changed`."""
    try:
        fd = untrusted.open_directory(name, _WALKED, at=parent, path_only=True)
    except untrusted.Unreadable as error:
        raise OSError(0, error.reason, str(name)) from None
    try:
        if _identity(os.fstat(fd)) != _identity(listed):
            raise _Changed(name)
        # A path-only descriptor takes no fchmod; its /proc link names that very directory.
        os.chmod(f"/proc/self/fd/{fd}", stat.S_IMODE(listed.st_mode) | stat.S_IRWXU)
    finally:
        os.close(fd)


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
            remove_dir(name_above, at=current)  # only when empty
        return True
    finally:
        os.close(current)


def delete(tree: Path, *, writable: bool = True) -> None:
    """Delete ``tree`` and everything in it: links are deleted, never followed; a directory the
    owner may not empty is made writable first (``writable``); another file system mounted inside
    is never entered (``tree`` then stays, and so does the mount). OSError (the one ``rmdir``
    of ``tree`` itself raised) when ``tree`` could not be deleted whole."""

    def gone(directory: int, name: str, info: os.stat_result, path: Path) -> None:
        unlink(name, at=directory)

    try:
        info = os.lstat(tree)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(info.st_mode):
        unlink(tree)
        return
    if not empty(tree, gone, writable=writable):
        raise OSError(0, "a directory in it was moved while it was being deleted", str(tree))
    remove_dir(tree, strict=True)


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


def delete_files(root: Path, chosen: Callable[[Path, os.stat_result], bool]) -> list[os.stat_result]:
    """Delete the regular files under ``root`` that ``chosen(path, stat)`` picks, and each directory
    below ``root`` left empty; the stat of each file deleted. A link is neither followed nor deleted,
    a mount point never entered (:func:`empty`); a file that cannot be deleted is left, unnamed.
    OSError when nothing was deleted because the walk could not start (``root`` is not a directory,
    a link to one included) or go on; a walk cut short after a deletion returns what it deleted."""
    deleted = []

    def entry(directory: int, name: str, info: os.stat_result, path: Path) -> None:
        # A name that became a link since its stat is deleted as the link: the unlink is relative
        # to the directory the walk holds open, so nothing outside it is ever reached.
        if stat.S_ISREG(info.st_mode) and chosen(path, info) and unlink(name, at=directory, strict=False):
            deleted.append(info)

    try:
        empty(root, entry)
    except OSError:
        if not deleted:
            raise
    return deleted


# -- the calls that change a name --------------------------------------------------------------
# ``at``/``target_at``: the open directory a name is in (None: a path, from the working directory).


def unlink(name: str | Path, *, at: int | None = None, strict: bool = True) -> bool:
    """Delete the file or link ``name`` (a link itself, never what it points to); True when it went.
    Absent is fine (False); with ``strict`` any other failure raises, without it the name stays."""
    try:
        os.unlink(name, dir_fd=at)
        return True
    except FileNotFoundError:
        return False
    except OSError:
        if strict:
            raise
        return False


def remove_dir(name: str | Path, *, at: int | None = None, strict: bool = False) -> bool:
    """``rmdir name`` when it is an empty directory (never a link to one); True when it went. With
    ``strict`` a failure raises (a directory not empty, not there), without it the name stays."""
    try:
        os.rmdir(name, dir_fd=at)
        return True
    except OSError:
        if strict:
            raise
        return False


def replace(source: str | Path, target: str | Path, *, at: int | None = None, target_at: int | None = None) -> None:
    """Rename ``source`` to ``target`` in one step, over whatever is at ``target`` (a link there is
    replaced, never followed)."""
    os.replace(source, target, src_dir_fd=at, dst_dir_fd=target_at)


def symlink(points_to: str | Path, name: str | Path, *, at: int | None = None) -> None:
    """Make ``name`` a symbolic link holding ``points_to``; fails when ``name`` is taken."""
    os.symlink(points_to, name, dir_fd=at)


def hard_link(source: str | Path, target: str | Path, *, at: int | None = None, target_at: int | None = None) -> None:
    """Make ``target`` another name of the file ``source`` (a link at ``source`` is linked as the
    link, never followed); fails when ``target`` is taken."""
    os.link(source, target, src_dir_fd=at, dst_dir_fd=target_at, follow_symlinks=False)


RENAME_NOREPLACE = 1
_AT_CWD = -100


def rename_noreplace(
    source: str | Path, target: str | Path, *, at: int | None = None, target_at: int | None = None
) -> None:
    """Rename ``source`` to ``target``, failing with EEXIST when ``target`` exists, in one step
    (``renameat2``): a rename that replaces would lose what is there without a word. Where the
    kernel or file system lacks it, a file is hard-linked then unlinked (the link fails when the
    name is taken), a directory renamed after a check."""
    import ctypes  # here, not above: only this move needs it, and a plan's writes import this module

    libc = ctypes.CDLL(None, use_errno=True)
    renameat2 = getattr(libc, "renameat2", None)
    if renameat2 is not None:
        from_at, to_at = _AT_CWD if at is None else at, _AT_CWD if target_at is None else target_at
        if renameat2(from_at, os.fsencode(source), to_at, os.fsencode(target), RENAME_NOREPLACE) == 0:
            return
        code = ctypes.get_errno()
        if code not in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
            raise OSError(code, os.strerror(code), str(target))
    if stat.S_ISDIR(os.stat(source, dir_fd=at, follow_symlinks=False).st_mode):
        with contextlib.suppress(FileNotFoundError):
            os.stat(target, dir_fd=target_at, follow_symlinks=False)
            raise OSError(errno.EEXIST, os.strerror(errno.EEXIST), str(target))
        os.rename(source, target, src_dir_fd=at, dst_dir_fd=target_at)
        return
    hard_link(source, target, at=at, target_at=target_at)
    os.unlink(source, dir_fd=at)


def file_identity(info: os.stat_result) -> tuple[int, int, int, int]:
    """What proves a name still is the file that was checked: its inode, and a size and mtime that
    no write since has changed (a hard link made of it changes neither)."""
    return info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns


def link_in(
    source: tuple[int | None, str],
    source_is: tuple,
    partial: tuple[int | None, str],
    target: tuple[int | None, str],
    *,
    target_is: tuple | None = None,
    also: str | None = None,
) -> bool:
    """Make the name ``target`` (``(directory, name)``) another name of the file ``source``, only
    while ``source`` is the very file ``source_is`` (:func:`file_identity`) identifies and, given
    ``target_is``, ``target`` still is that one: a hard link of ``source`` (never through a link)
    made at ``partial``, proved there to be that file, then renamed over ``target``. ``also``: a
    second name for it kept in ``partial``'s directory. False (``target`` left as it was, nothing
    left at ``partial`` or ``also``) when either is no longer the file checked; OSError when a call
    fails (again nothing left behind).

    Between the last check and the rename ``target`` can still be swapped: the rename then replaces
    whatever is there with the checked file, in ``target``'s own directory, never anywhere else."""
    partial_at, partial_name = partial
    unlink(partial_name, at=partial_at)  # a run killed between its link and its rename left it
    hard_link(source[1], partial_name, at=source[0], target_at=partial_at)
    placed = False
    try:
        made = os.stat(partial_name, dir_fd=partial_at, follow_symlinks=False)
        if not stat.S_ISREG(made.st_mode) or file_identity(made) != source_is:
            return False
        if target_is is not None:
            try:
                now = os.stat(target[1], dir_fd=target[0], follow_symlinks=False)
            except OSError:
                return False
            if file_identity(now) != target_is:
                return False
        if also is not None:
            hard_link(partial_name, also, at=partial_at, target_at=partial_at)
        replace(partial_name, target[1], at=partial_at, target_at=target[0])
        placed = True
        return True
    finally:
        if not placed:
            for leftover in (partial_name, also):
                if leftover is not None:
                    unlink(leftover, at=partial_at, strict=False)
