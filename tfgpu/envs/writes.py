"""The one door for writing into an environment: every file the tool writes, every link it makes,
every path it deletes inside an env (or the staging directory of one) goes through here, and the
check that comes before uv or rattler install into an env that already exists. Each name it changes
it changes through the tool's one set of primitives (``tfgpu.doors.trees``: no link at the name followed,
``OSError`` as the system call raises it); this module adds the env's checks and the typed errors.

What it promises, in one place:

* nothing is written, linked or deleted through a link that leaves the env: a write's directory
  must resolve inside the root it is made for (``repair-path-outside``), and :func:`check_tree`
  walks an existing env (without following links) for directory links that lead out of it before
  an engine extracts anything there;
* a file is written whole or not at all: a temporary in the same directory, renamed into place, so
  a link planted at the target is replaced, never followed;
* a hard link brought into an env is made of a name in a directory the caller holds open, never
  through a link, and only while that name is still the file the caller checked (:func:`put_hardlink`);
* a directory (or anything else) where a file or link goes is a typed error
  (``env-path-blocked``) naming the path, never ``IsADirectoryError``;
* a full disk or a refused permission is a typed error (``env-write-failed``,
  ``target-not-writable``), never an ``OSError`` traceback;
* a tree is deleted only below the directory the caller owns, and only that tree's own modes are
  changed on the way (never a parent's); a tree with another file system mounted inside it is not
  deleted at all (``env-has-mount``), checked before the first delete so nothing is half-removed;
* a move never replaces what is at its destination unless the caller says so;
* a file of an env the tool reads in order to rewrite it (:func:`read_own`) is read through a
  link only while the link resolves inside the env: bytes or a mode from outside never end up in it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from pathlib import Path

from tfgpu.doors import trees, untrusted
from tfgpu.errors import ImpossibleError, OperationError

MAX_DEPTH = 64
"""How deep :func:`check_tree` walks; no engine writes deeper than this into an env."""


def blocked(path: Path, what: str = "a file") -> ImpossibleError:
    return ImpossibleError(
        "env-path-blocked",
        f"{path} is in the way: tfgpu-install writes {what} there, and a "
        "directory (or something else that is not a file or link) is there now; nothing more "
        "was written.",
        [f"Move it aside (`mv {path} {path}.saved`), then run the same command again."],
    )


def outside(path: Path, root: Path) -> ImpossibleError:
    return ImpossibleError(
        "repair-path-outside",
        f"{path} leads outside {root} (through a symbolic link); "
        "tfgpu-install writes only inside the env, so it stopped before writing there.",
        [
            f"Look at what links out of the env: ls -l {path.parent}",
            "Replace the link with a real directory (or remove it), then run the same command again.",
        ],
    )


def failed(error: OSError, path) -> Exception:
    """A typed error for an ``OSError`` met while writing ``path``."""
    if error.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return ImpossibleError(
            "target-not-writable",
            f"Cannot write {path}: {error.strerror}.",
            [
                "Check the permissions of that directory (and that its file system is not "
                "read-only), then run the same command again."
            ],
        )
    if error.errno in (errno.EISDIR, errno.ENOTDIR, errno.EEXIST, errno.ENOTEMPTY):
        return blocked(Path(path))
    return OperationError(
        "env-write-failed",
        f"Writing {path} failed: {error.strerror or error}.",
        ["Check free disk space (`df -h`), then run the same command again."],
    )


def _real_inside(path: str, root: str) -> bool:
    real_root = os.path.realpath(root)
    return os.path.commonpath([os.path.realpath(path), real_root]) == real_root


def inside(root: Path, relative: str) -> Path:
    """``root / relative``, refused unless ``relative`` is a plain relative path and the directory it
    goes into really is inside ``root`` (a directory on the way that links out would carry a write
    elsewhere)."""
    parts = Path(relative).parts
    path = root / relative
    if not parts or relative.startswith("/") or ".." in parts or "\0" in relative:
        raise outside(path, root)
    if not _real_inside(str(path.parent), str(root)):
        raise outside(path, root)
    return path


def check_tree(root: Path, max_depth: int = MAX_DEPTH) -> None:
    """Before an engine installs into (or uninstalls from) the existing env ``root``: every directory
    in it that is a link must resolve inside ``root``. Links are never followed, so the walk ends.

    A file link out of the env is not refused here: a venv's ``bin/python`` links to the system's
    interpreter, and an engine replaces or deletes a file link, never writes through it. The files
    the tool itself reads in order to rewrite them go through :func:`read_own`, which refuses a link
    out."""
    pending = [(str(root), 0)]
    while pending:
        directory, depth = pending.pop()
        try:
            with os.scandir(directory) as entries:
                found = list(entries)
        except OSError:
            continue  # unreadable: the engine cannot write there either, and says so
        for entry in found:
            try:
                if entry.is_symlink():
                    if os.path.isdir(entry.path) and not _real_inside(entry.path, str(root)):
                        raise outside(Path(entry.path), root)
                elif entry.is_dir(follow_symlinks=False) and depth < max_depth:
                    pending.append((entry.path, depth + 1))
            except OSError:
                continue


def read_own(path: Path, root: Path) -> tuple[bytes, int] | None:
    """The bytes and mode of the env's file ``path`` that the tool is about to rewrite (None: there
    is no file there). A link is followed only while it resolves inside ``root``; one that leads out
    is ``repair-path-outside``, so nothing from outside the env is ever copied into it."""
    real = os.path.realpath(path)
    if not _real_inside(real, str(root)):
        raise outside(path, root)
    try:
        info = os.stat(real, follow_symlinks=False)
    except FileNotFoundError:
        return None
    except OSError as error:
        raise failed(error, path) from None
    if not stat.S_ISREG(info.st_mode):
        return None
    return untrusted.read_bytes(real, untrusted.ENV_FILE), info.st_mode & 0o777


def make_dirs(path: Path, root: Path | None = None) -> None:
    """``mkdir -p path``; a file where a directory goes is ``env-path-blocked``."""
    if root is not None and not _real_inside(str(path), str(root)):
        raise outside(path, root)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise blocked(path, "a directory") from None
    except OSError as error:
        raise failed(error, path) from None


def _partial(path: Path) -> Path:
    """The temporary name beside ``path`` a write is made under before it is renamed into place. A
    file name holds at most 255 bytes, not characters: the start of ``path``'s name is kept up to
    200 bytes (a whole character at a time), so a name of 85 CJK characters, 255 bytes, still has one."""
    name = path.name[:200]
    while len(os.fsencode(name)) > 200:
        name = name[:-1]
    return path.with_name(f".{name}.{os.getpid()}.tfgpu-tmp")


def _ready(path: Path, root: Path | None) -> None:
    if root is not None and not _real_inside(str(path.parent), str(root)):
        raise outside(path, root)
    make_dirs(path.parent)
    try:
        info = path.lstat()
    except FileNotFoundError:
        return
    except OSError as error:
        raise failed(error, path) from None
    if not (stat.S_ISREG(info.st_mode) or stat.S_ISLNK(info.st_mode)):
        raise blocked(path)


def put_bytes(path: Path, data: bytes, mode: int | None = None, root: Path | None = None) -> Path:
    """Write ``data`` to ``path`` whole (a temporary beside it, renamed into place); a link there is
    replaced, never followed. ``root``: the env ``path`` must stay inside. A file that already holds
    exactly ``data`` (and ``mode``) is left as it is: a second run of the same build or export changes
    nothing, not even a directory's modification time."""
    _ready(path, root)
    if _holds(path, data, mode):
        return path
    partial = _partial(path)
    try:
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        if mode is not None:
            os.chmod(partial, mode)
        trees.replace(partial, path)
    except OSError as error:
        _forget(partial)
        raise failed(error, path) from None
    return path


def _holds(path: Path, data: bytes, mode: int | None) -> bool:
    """Whether ``path`` is a regular file (not a link) with exactly these bytes and mode."""
    try:
        info = os.lstat(path)
        if not stat.S_ISREG(info.st_mode) or info.st_size != len(data):
            return False
        if mode is not None and stat.S_IMODE(info.st_mode) != mode:
            return False
        return untrusted.read_bytes(path, untrusted.ENV_FILE) == data
    except (OSError, untrusted.Unreadable):
        return False


def put_text(path: Path, text: str, mode: int | None = None, root: Path | None = None) -> Path:
    return put_bytes(path, text.encode("utf-8"), mode, root)


def put_link(path: Path, target: str | Path, root: Path | None = None) -> Path:
    """Make ``path`` a symbolic link to ``target`` (made beside it, renamed into place); a link
    already pointing there is left as it is."""
    _ready(path, root)
    if os.path.islink(path) and os.readlink(path) == os.fspath(target):
        return path
    return _swap_in(path, lambda partial: trees.symlink(target, partial))


def _swap_in(path: Path, make) -> Path:
    """``make(partial)`` beside ``path``, then renamed over it: a reader sees the old entry or the
    new one, never none; a failure leaves no partial behind."""
    partial = _partial(path)
    try:
        _forget(partial)
        make(partial)
        trees.replace(partial, path)
    except OSError as error:
        _forget(partial)
        raise failed(error, path) from None
    return path


def put_hardlink(path: Path, keep: tuple[int, str], same_as: tuple, root: Path | None = None) -> bool:
    """Make ``path`` another name of the file named ``keep[1]`` in the open directory ``keep[0]`` (a
    hard link made beside ``path``, renamed into place), only while that name is the very file
    ``same_as`` (``(st_dev, st_ino, st_size, st_mtime_ns)``) identifies: one inode where two held the same bytes
    (``tfgpu.cache.dedupe``). The link is made without following a link at ``keep`` and checked
    before it is renamed in, so a file swapped in at that name since it was checked never reaches
    the env. False (``path`` left as it was) when it is no longer that file."""
    _ready(path, root)
    try:
        return trees.link_in(keep, same_as, (None, str(_partial(path))), (None, str(path)))
    except OSError as error:
        raise failed(error, path) from None


def put_state(path: Path, state, root: Path | None = None) -> None:
    """``state`` as :func:`tfgpu.repair.plan.state_of` reads it: None (absent), ("link", target) or
    ("file", bytes, mode)."""
    if state is None:
        delete(path, root)
    elif state[0] == "link":
        put_link(path, state[1], root)
    else:
        put_bytes(path, state[1], state[2], root)


def delete(path: Path, root: Path | None = None) -> None:
    """Delete the file or link at ``path`` (a link itself, never what it points to); absent is fine;
    a directory there is ``env-path-blocked``."""
    if root is not None and not _real_inside(str(path.parent), str(root)):
        raise outside(path, root)
    try:
        info = path.lstat()
    except FileNotFoundError:
        return
    except OSError as error:
        raise failed(error, path) from None
    if stat.S_ISDIR(info.st_mode):
        raise blocked(path)
    _forget(path, strict=True)


def _forget(path: Path, strict: bool = False) -> None:
    try:
        trees.unlink(path, strict=strict)
    except OSError as error:
        raise failed(error, path) from None


def remove_empty_dir(path: Path) -> bool:
    """``rmdir path`` when it is a real, empty directory; True when it went."""
    try:
        if stat.S_ISDIR(path.lstat().st_mode) and not any(path.iterdir()):
            return trees.remove_dir(path)
    except OSError:
        pass
    return False


def move(source: Path, destination: Path, replace: bool = False) -> None:
    """Rename ``source`` to ``destination`` (same directory tree, one step). Whatever is at
    ``destination`` is kept (``env-path-blocked``) unless ``replace``: a rename that replaces would
    lose it without a word."""
    try:
        if replace:
            trees.replace(source, destination)
        else:
            trees.rename_noreplace(source, destination)
    except OSError as error:
        raise failed(error, destination) from None


def mounts_inside(tree: Path, max_depth: int = MAX_DEPTH) -> list[str]:
    """The directories in ``tree`` on another file system than ``tree`` itself (a mount point),
    found without following links; the walk does not go into them."""
    try:
        device = os.lstat(tree).st_dev
    except OSError:
        return []
    found, pending = [], [(str(tree), 0)]
    while pending:
        directory, depth = pending.pop()
        try:
            with os.scandir(directory) as entries:
                children = [entry.path for entry in entries if entry.is_dir(follow_symlinks=False)]
        except OSError:
            continue
        for child in children:
            try:
                if os.lstat(child).st_dev != device or os.path.ismount(child):
                    found.append(child)
                elif depth < max_depth:
                    pending.append((child, depth + 1))
            except OSError:
                continue
    return sorted(found)


def check_no_mounts(tree: Path) -> None:
    """Refuse (``env-has-mount``) before anything of ``tree`` is deleted or moved when another file
    system is mounted inside it: its files are not the tool's to delete."""
    found = mounts_inside(tree)
    if found:
        raise ImpossibleError(
            "env-has-mount",
            f"{found[0]} is a mount point inside {tree} (another file system "
            f"is mounted there{f', and {len(found) - 1} more' if len(found) > 1 else ''}); "
            "tfgpu-install deletes only what it made, so it deleted nothing.",
            [f"Unmount it first (`umount {found[0]}`), then run the same command again."],
        )


def remove_tree(tree: Path, owner: Path | None = None) -> None:
    """Delete ``tree`` (a directory this run made or proved its own), links inside deleted, never
    followed. A read-only directory inside it is made writable to empty it; nothing above ``tree``
    (or ``owner``, a directory above it the caller also made) is ever changed. A failure (the parent
    is read-only, say) is ``target-not-writable``, naming what is left."""
    top = os.path.realpath(owner if owner is not None else tree)

    def delete_whole() -> None:
        try:
            trees.delete(tree)  # no recursion, whatever the depth: a chain of thousands of levels goes too
        except PermissionError:
            parent = os.path.dirname(os.path.abspath(tree))
            if os.path.commonpath([os.path.realpath(parent), top]) != top:
                raise  # the parent of the tree (or of ``owner``): not ours to chmod
            os.chmod(parent, stat.S_IRWXU)
            trees.delete(tree)

    if not (tree.exists() or tree.is_symlink()):
        return
    if tree.is_symlink() or not tree.is_dir():
        _forget(tree, strict=True)
        return
    check_no_mounts(tree)  # refused before the first delete, not found half-way
    try:
        delete_whole()
    except OSError as error:
        raise ImpossibleError(
            "target-not-writable",
            f"Could not delete {tree}: {error.strerror or error} (its "
            "directory is not writable). It is left there; nothing else was changed.",
            [
                f"Make {tree.parent} writable, then run the same command again (it deletes {tree.name} first).",
                f"Or delete it yourself: rm -rf {tree}",
            ],
        ) from None


def scratch_text(directory: Path, name: str, text: str) -> Path:
    """A file in the caller's own temporary directory (argument files for uv and rattler)."""
    return put_text(directory / name, text)


def discard_tree(tree: Path) -> None:
    """Delete a temporary tree of the tool's own (a runfile's scratch), errors ignored: it holds
    nothing anyone needs, and links inside it are deleted, never followed."""
    with contextlib.suppress(OSError):
        trees.delete(tree)
