"""Where tfgpu-install keeps its own files (platformdirs; each overridable for tests and CI)."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import sys

from tfgpu.doors import secrets
from tfgpu.errors import ImpossibleError, OperationError, UsageError

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing: type checkers treat it alike
if TYPE_CHECKING:
    from pathlib import Path

NAME_MAX = 255
"""Bytes in one path component: what Linux, macOS and Windows file systems take."""
PATH_MAX = 4095
"""Bytes in a whole path (Linux's PATH_MAX, less the terminating NUL)."""


def user_path(text: str, what: str) -> str:
    """``text`` as the user gave it, once it can name a file at all: no NUL, each component at
    most :data:`NAME_MAX` bytes, the whole at most :data:`PATH_MAX`; else ``bad-path`` (exit 2)
    naming ``what`` (the option or variable). Every path option and ``TFGPU_*`` path variable is
    read through here: past this point ``stat()`` on it fails with ENOENT or EACCES, which the
    code handles, never with ENAMETOOLONG, which it would not."""
    try:
        raw = os.fsencode(text)
    except (UnicodeError, TypeError):
        raw = None
    way = f"Give {what} a shorter path."
    problem: str | None
    if raw is not None and not raw:
        # Empty is never "not given": it would quietly mean the default (the active env, the
        # nearest project file, the default env name) instead of what was typed.
        problem, way = "it is empty", f"Give {what} a path, or leave the option out."
    elif raw is not None and raw.startswith(b"~") and os.path.expanduser(text) == text:
        # ``~nosuchuser/x``: pathlib would raise RuntimeError on it, deep in whatever reads it.
        problem, way = "its ~ names a home directory this machine does not know", f"Give {what} as a full path."
    elif raw is None or b"\0" in raw:
        problem = "it is not a path the file system can hold (a NUL or an unencodable character)"
    elif len(raw) > PATH_MAX:
        problem = f"it is {len(raw)} bytes long; no file system takes a path over {PATH_MAX}"
    else:
        long = next((part for part in raw.split(b"/") if len(part) > NAME_MAX), None)
        problem = (
            None
            if long is None
            else (f"one of its names is {len(long)} bytes long; no file system takes a name over {NAME_MAX}")
        )
    if problem:
        shown = text if len(text) <= 60 else f"{text[:60]} ({len(text):,} characters; the first 60 shown)"
        raise UsageError("bad-path", f"{what} {shown!r}: {problem}.", [way])
    return text


def path_option(what: str):
    """The argparse ``type`` of an option that names a file or directory: its text goes through
    :func:`user_path` when the option is read, before any code stats it. A URL (``--channel``,
    ``--find-links``) is the URL door's to check."""

    def check(text: str) -> str:
        return text if "://" in text else user_path(text, what)

    return check


def _variable(name: str) -> str | None:
    """A ``TFGPU_*`` path variable, through :func:`user_path` (None when unset or empty)."""
    value = os.environ.get(name)
    return user_path(value, name) if value else None


def cache_root() -> Path:
    """Caches: parsed tables, uv's package cache. ``TFGPU_CACHE_DIR`` overrides."""
    return _as_path(cache_root_text())


def cache_root_text() -> str:
    """:func:`cache_root` as text, for a command that reads its tables' cache and makes no other
    path (``plan``: see :func:`_as_path`)."""
    override = _variable("TFGPU_CACHE_DIR")
    if override:
        return override
    linux = _xdg_home("XDG_CACHE_HOME", "~/.cache")
    if linux is not None:
        return os.path.join(linux, "tfgpu-install")
    # Start-up cost: `plan --json --no-detect` loads this module but not platformdirs.
    from platformdirs import user_cache_dir

    return str(user_cache_dir("tfgpu-install"))


def _as_path(text: str) -> Path:
    """``text`` as a ``pathlib.Path``, for the callers that join and make directories with one."""
    # Start-up cost: pathlib (with the urllib.parse and ipaddress it imports) is 16M instructions
    # (callgrind; a bare `python -c pass` is 39M); `plan` reads its few paths as text, through os.path.
    from pathlib import Path

    return Path(text)


CACHE_TAG = (
    "Signature: 8a477f597d28d172789f06886806bc55\n"
    "# This file is a cache directory tag created by tfgpu-install.\n"
    "# For information about cache directory tags see https://bford.info/cachedir/\n"
)
"""The tag at the top of the tool's cache: backup tools skip the directory, and ``cache prune|clean``
act only on a directory that has it (a directory's names alone prove nothing)."""


def tag_cache(root: str | Path | None = None) -> None:
    """Write the tag at the top of the cache (``root``: the cache root) when the tool makes that
    directory (it is not there, or empty): a directory that already holds something is not claimed
    (``TFGPU_CACHE_DIR`` pointed at a project; ``cache prune|clean`` adopt an untagged cache of an
    earlier version by its content). Quietly nothing where it cannot be written."""
    root = cache_root_text() if root is None else os.fspath(root)
    tag = os.path.join(root, "CACHEDIR.TAG")
    try:
        if any(os.scandir(root)):
            return
    except FileNotFoundError:
        pass
    except OSError:
        return
    try:
        os.makedirs(root, exist_ok=True)
        fd = os.open(tag, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644)
        with os.fdopen(fd, "w") as out:
            out.write(CACHE_TAG)
    except OSError:
        pass


def is_tagged(root: Path) -> bool:
    """Whether ``root`` holds the tool's cache tag (a regular file, read without following a link)."""
    # Start-up cost: `--help` loads this module but not tfgpu.doors.untrusted.
    from tfgpu.doors import untrusted

    try:
        return untrusted.read_bytes(root / "CACHEDIR.TAG", untrusted.CACHE).decode("ascii", "replace") == CACHE_TAG
    except untrusted.Unreadable:
        return False


def data_dir() -> Path:
    """The user's own data: release rows fetched by ``tfgpu-install update-data``.
    ``TFGPU_USER_DATA_DIR`` overrides (tests, CI)."""
    return _as_path(data_dir_text())


def data_dir_text() -> str:
    """:func:`data_dir` as text (``plan`` reads the release overlay there: see :func:`_as_path`)."""
    override = _variable("TFGPU_USER_DATA_DIR")
    if override:
        return override
    linux = _xdg_home("XDG_DATA_HOME", "~/.local/share")
    if linux is not None:
        return os.path.join(linux, "tfgpu-install", "data")
    # Start-up cost: `plan --json --no-detect` loads this module but not platformdirs.
    from platformdirs import user_data_dir

    return os.path.join(user_data_dir("tfgpu-install"), "data")


def _xdg_home(variable: str, default: str) -> str | None:
    """On Linux, the XDG base directory platformdirs gives: ``$variable`` when it is an absolute
    path, else ``default`` under an absolute ``$HOME``; None elsewhere or when HOME is not absolute
    (platformdirs then decides). Every command reads the cache dir and platformdirs' import (with
    tempfile and shutil) was a tenth of ``plan``'s start-up."""
    if not sys.platform.startswith("linux"):
        return None
    value = os.environ.get(variable, "")
    if os.path.isabs(value):
        return value
    if not os.path.isabs(os.environ.get("HOME", "")):
        return None
    return os.path.expanduser(default)


def log_dir() -> Path:
    """One log file per operation, with every command and its whole output."""
    override = _variable("TFGPU_LOG_DIR")
    if override:
        return _as_path(override)
    # Start-up cost: `plan --json --no-detect` loads this module but not platformdirs.
    from platformdirs import user_log_dir

    return _as_path(user_log_dir("tfgpu-install"))


def output_dir(directory: Path, output: str) -> Path:
    """Create the directory ``-o output`` writes into (and its parents), or say clearly why not."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ImpossibleError(
            "bad-output",
            f"-o {output}: cannot create {directory} ({error.strerror}).",
            ["Write somewhere you may write (a directory of yours, or the current one)."],
        ) from None
    if not os.access(directory, os.W_OK | os.X_OK):
        raise ImpossibleError(
            "bad-output",
            f"-o {output}: {directory} is not writable.",
            ["Write somewhere you may write (a directory of yours, or the current one)."],
        )
    return directory


def write_output(path: Path, content: str | bytes, mode: int = 0o644) -> Path:
    """Write a file the user asked for (``-o``: an export, a lock) in one step.

    The bytes go to a fresh temporary file beside ``path`` (``mkstemp``: created exclusively, so no
    planted name or link is followed), which is then renamed over ``path``. A symbolic link at
    ``path`` is therefore replaced, never written through (a link planted in a checkout cannot
    aim the write at ``~/.bashrc``), and a crash leaves the old file or the new one, not half.

    It is also the secrets door's last check for every such file (``tfgpu.doors.secrets``): text holding
    a credential (a ``/t/<token>/``, ``user:password@``, ``?token=``, a credential variable's value)
    is refused (``secret-in-output``) and nothing is written, whatever the renderer was given.

    A full disk, a read-only file system or a refused permission is ``disk-full`` or
    ``write-failed`` (:func:`write_failure`), the old file kept."""
    write_outputs([(path, content, mode)])
    return path


def write_outputs(files, below: Path | None = None) -> None:
    """Write several files the user asked for as one: every ``(path, content, mode)`` is written to
    a temporary beside it first, and only when all of them are whole are they renamed into place,
    so a disk that fills half-way leaves every old file as it was (a lock and the pylock beside it
    never from two runs). Each passes the secrets door first (:func:`write_output`); one that holds
    a credential stops them all before anything is written. Failures as :func:`write_output`'s.

    ``below``: the directory (``-o DIR``) every path lies in. Each directory from there down is
    opened without following a link (made when missing), and the temporary is written and renamed
    through that descriptor: a directory swapped for a link after the caller's checks (a race)
    never carries a file out of ``below`` (``bad-output``, nothing replaced)."""
    # Start-up cost: `plan` loads this module but not tfgpu.doors.trees (only a write needs it).
    from tfgpu.doors import trees

    files = [
        (path, content.encode("utf-8") if isinstance(content, str) else content, mode) for path, content, mode in files
    ]
    for path, data, _ in files:
        secrets.refuse_in(data.decode("utf-8", errors="replace"), str(path))
    partials: list[tuple[int, str, str]] = []
    directories: dict[Path, int] = {}
    path, replaced = None, 0
    try:
        for path, data, mode in files:
            if path.parent not in directories:
                directories[path.parent] = _open_parent(path, below)
            at = directories[path.parent]
            partial, fd = _fresh(at, path.name)
            partials.append((at, partial, path.name))
            try:
                os.fchmod(fd, mode)  # the file made, never a name swapped for a link meanwhile
            except OSError:
                os.close(fd)
                raise
            with os.fdopen(fd, "wb") as handle:  # closing it reports what a write put off (NFS)
                handle.write(data)
        for at, partial, name in partials:
            trees.replace(partial, name, at=at, target_at=at)
            replaced += 1
    except OSError as error:
        failure = write_failure(error, path, replaced=(replaced, len(partials)))
        if failure is None:
            raise
        raise failure from None
    finally:
        for at, partial, _ in partials:
            trees.unlink(partial, at=at)
        for at in directories.values():
            os.close(at)


def _fresh(at: int, name: str) -> tuple[str, int]:
    """A temporary file made exclusively in the open directory ``at`` beside ``name`` (as
    ``mkstemp`` makes one: no planted name or link is followed): its name and a descriptor."""
    while True:
        partial = f".{name}.{os.urandom(4).hex()}.tmp"  # secrets.token_hex(4), without importing hmac and hashlib
        try:
            return partial, os.open(
                partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=at
            )
        except FileExistsError:
            continue


def _open_parent(path: Path, below: Path | None) -> int:
    """The directory ``path`` goes in, opened (see :func:`write_outputs` for ``below``). The
    directory the user named is opened as named (``/.``: a link the user gave is followed)."""
    if below is None:
        return _open_directory(os.path.join(path.parent, "."))
    at = _open_directory(os.path.join(below, "."))
    try:
        for name in path.relative_to(below).parts[:-1]:
            opened = _directory_below(at, name, path, below)
            os.close(at)
            at = opened
    except BaseException:
        os.close(at)
        raise
    return at


def _open_directory(name: str, at: int | None = None) -> int:
    """``name`` opened as a directory through the door (never a link in its last component); an
    ``OSError`` saying why not, for :func:`write_failure`."""
    # Start-up cost: `--help` loads this module but not tfgpu.doors.untrusted.
    from tfgpu.doors import untrusted

    try:
        return untrusted.open_directory(name, untrusted.Kind("a directory written into", 0, None, links=False), at=at)
    except untrusted.Unreadable:
        os.stat(name, dir_fd=at, follow_symlinks=False)  # the real reason, where there is one
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), name) from None


def _directory_below(at: int, name: str, path: Path, below: Path) -> int:
    """``name`` in the open directory ``at``, made when missing, opened without following a link;
    ``bad-output`` when it is a link or no directory (swapped while the files were written)."""
    try:
        info = os.stat(name, dir_fd=at, follow_symlinks=False)
    except FileNotFoundError:
        with contextlib.suppress(FileExistsError):  # made meanwhile: checked below like any other
            os.mkdir(name, dir_fd=at)
        info = os.stat(name, dir_fd=at, follow_symlinks=False)
    if stat.S_ISDIR(info.st_mode):
        try:
            opened = _open_directory(name, at)
        except PermissionError:
            if stat.S_ISDIR(os.stat(name, dir_fd=at, follow_symlinks=False).st_mode):
                raise  # a directory still: one that may not be opened (write-failed)
            opened = None
        if opened is not None and os.fstat(opened).st_ino == info.st_ino:
            return opened
        if opened is not None:
            os.close(opened)
    raise ImpossibleError(
        "bad-output",
        f"{path.parent} is not a directory below {below} (a symbolic link or a file took its place "
        "while the files were written); nothing was replaced.",
        ["Remove what took its place, then run the same command again."],
    )


def write_failure(error: OSError, path=None, replaced: tuple[int, int] = (0, 0)):
    """The typed error for an ``OSError`` met while writing ``path`` (or any file, at the command
    line's boundary): ``disk-full`` for no space or quota left, ``write-failed`` for a read-only
    file system or a refused permission; None for any other (a programming error: a traceback).
    ``replaced``: (files already renamed into place, files in all) when a rename failed."""
    where = path if path is not None else error.filename
    named = f" {where}" if where else " a file"
    # From write_outputs the old files are known to be kept; at the boundary only that it stopped.
    verb, after = ("write", "nothing was replaced (a file already there is kept as it was)")
    if path is None:
        verb, after = ("write or read", "the command stopped there")
    elif replaced[0]:  # a rename failed after others were made: each file whole, some old, some new
        after = f"{replaced[0]} of the {replaced[1]} files were already replaced, the others are as they were"
    if error.errno in (errno.ENOSPC, errno.EDQUOT):
        return OperationError(
            "disk-full",
            f"Cannot write{named}: {error.strerror} (the disk or your quota is full); {after}.",
            ["Free some space (`df -h` shows where), then run the same command again."],
        )
    if error.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        return OperationError(
            "write-failed",
            f"Cannot {verb}{named}: {error.strerror}; {after}.",
            ["Write somewhere you may write (a directory of yours), or fix the directory's permissions."],
        )
    return None
