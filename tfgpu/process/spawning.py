"""How a child is started so that the kernel kills it when the tool dies, without copying the tool.

``PR_SET_PDEATHSIG`` (the child is killed when the tool dies, even by SIGKILL: no uv writes on
into a staging directory the tool no longer owns) must be set by the child itself, between fork
and exec. Python runs code there only through ``subprocess``'s ``preexec_fn``, and that makes it
``fork`` rather than ``vfork``: every page table of the tool is copied and each page it touches
afterwards faults, about 3 ms of CPU a child from a 50 MB process and 12-15 ms from a 300 MB one,
against 0.6 ms with ``vfork``; and CPython documents ``preexec_fn`` as unsafe while other threads
run (https://docs.python.org/3/library/subprocess.html#subprocess.Popen, "preexec_fn").

So, where util-linux's ``setpriv`` can set it (``--pdeathsig``, util-linux 2.33 and later: Debian
10, Ubuntu 20.04, RHEL 9), a child is started as ``setpriv --pdeathsig KILL -- PROGRAM ARGS`` with
no ``preexec_fn``, and ``subprocess`` uses ``vfork``. ``setpriv`` is taken from ``/usr/bin`` or
``/bin`` only, never from ``PATH``: it starts every child. It is used only for a program found here
as the kernel will run it (:func:`_runnable`: the first of ``PATH``'s candidates, as ``subprocess``
tries them, that is a regular executable file holding an ELF image of this machine's kind, read
as far as the kernel reads it, or a ``#!`` line naming one; not reached through procfs, whose names
mean setpriv there, and not open for writing): anything else is started as before, so a missing, broken or odd program
fails exactly as ``subprocess`` reports it ("could not start"), never as setpriv's exit 127. The
child then sees the program's path as its ``argv[0]`` (``/usr/bin/uv`` where it was asked for as
``uv``), as it would have been found. The death signal is set as setpriv starts, half a millisecond
after ``subprocess`` returns the child: a SIGKILL of the tool inside that window leaves the child
running (setpriv does not look whether its parent is still there; the ``preexec_fn`` of the other
way does, after its ``prctl``). An argv near the kernel's limit is started the other way too
(setpriv's words would push it over).

Everywhere else on Linux (no such setpriv, or the signals held in this thread by
``tfgpu.process.signalmask.shielded``) the child runs :func:`_die_with_parent` between fork and
exec. macOS has no death signal: a child there is started with nothing run between fork and exec,
unless the signals are held (then they are let in before the exec)."""

from __future__ import annotations

import errno
import os
import signal
import stat
import sys
from collections.abc import Callable, Mapping, Sequence

from tfgpu.doors import untrusted

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing: type checkers treat it alike
if TYPE_CHECKING:
    from typing import TypeVar

    Started = TypeVar("Started")

SETPRIV = ("/usr/bin/setpriv", "/bin/setpriv")
_SETPRIV = untrusted.Kind("setpriv", 16 * 1024 * 1024, None)
_EXECUTABLE = untrusted.Kind("a program to run", 1 << 40, None)
_HEAD = 256  # Linux reads a #! line up to 256 bytes (BINPRM_BUF_SIZE)

_found: dict[str, object] = {}
"""What this process looked up once: ``wrapper`` (setpriv's path or None), ``native`` (the image
kind of this interpreter: :func:`_image_kind`), ``prctl``; and ``parent``, the pid a child started
with :func:`_die_with_parent` must still have as its parent once its death signal is set."""


def how(
    argv: Sequence[str], env: Mapping[str, str], cwd: os.PathLike | str | None
) -> tuple[list[str], Callable | None]:
    """What to hand ``subprocess.Popen`` for ``argv``: the argv to run and its ``preexec_fn``."""
    held = _held_here()
    if not held and not sys.platform.startswith("linux"):
        return list(argv), None  # no death signal to set, no signal to let in: nothing to run in the child
    wrapper = _wrapper()
    if wrapper is not None and not held and _fits(argv, env):
        program = _runnable(argv[0], env, cwd)
        if program is not None:
            return [wrapper, "--pdeathsig", "KILL", "--", program, *argv[1:]], None
    _prepare_prctl()
    _found["parent"] = os.getpid()
    return list(argv), _die_with_parent


_ROOM = 64 * 1024  # setpriv's own words and the program's whole path, with room to spare


def _fits(argv: Sequence[str], env: Mapping[str, str]) -> bool:
    """Whether ``argv`` and ``env`` leave the kernel's argument limit room for setpriv's additions:
    an argv that just fits under ``subprocess`` must not fail through setpriv (``E2BIG``)."""
    try:
        limit = os.sysconf("SC_ARG_MAX")
    except (OSError, ValueError, AttributeError):
        return False
    if limit <= 0:
        return False
    size = 0
    for text in (*argv, *(f"{key}={value}" for key, value in env.items())):
        size += len(os.fsencode(text)) + 1 + 8  # the string, its NUL, its pointer
        if size + _ROOM > limit:
            return False
    return True


def _wrapper() -> str | None:
    """``/usr/bin/setpriv`` (or ``/bin/setpriv``) where it has ``--pdeathsig``; looked up once.

    Its support is read from the program itself (the option's name is in its table of options)
    rather than from a run of ``setpriv --help``: a child more for every command."""
    if "wrapper" not in _found:
        _found["wrapper"] = None
        if sys.platform.startswith("linux"):
            for path in SETPRIV:
                try:
                    # The kernel must run it too (its loader there, of this machine's kind): a
                    # setpriv it refuses would fail every child.
                    image = untrusted.read_bytes(path, _SETPRIV) if os.access(path, os.X_OK) else b""
                    if b"pdeathsig" in image and _native(image[:_HEAD]) and _loads(path, image[:_HEAD], loader=True):
                        _found["wrapper"] = path
                        break
                except untrusted.Unreadable:
                    continue
    return _found["wrapper"]  # type: ignore[return-value]


def _held_here() -> bool:
    """Whether any signal is blocked in this thread (SIGINT, SIGTERM and SIGHUP by ``shielded``,
    any by a parent that started the tool so): a vforked child would keep it blocked through exec."""
    try:
        return bool(signal.pthread_sigmask(signal.SIG_BLOCK, ()))
    except (AttributeError, OSError, ValueError):
        return True


def _runnable(name: str, env: Mapping[str, str], cwd: os.PathLike | str | None) -> str | None:
    """The path ``subprocess`` would run for ``name`` where the exec will certainly succeed, else
    None (start it the ordinary way, and let ``subprocess`` report what it finds)."""
    if "/" in name:
        candidates = [name]
    else:
        # subprocess tries each directory of the child's PATH in turn and runs the first that execs
        candidates = [os.path.join(directory, name) for directory in os.get_exec_path(dict(env))]
    for candidate in candidates:
        if "/" not in candidate:
            return None  # an empty PATH entry: setpriv would search PATH itself
        where = os.path.join(os.fsdecode(cwd), candidate) if cwd is not None else candidate  # str, bytes or a path
        if _through_proc(where):
            return None  # names another file (or none) from setpriv than here: the ordinary way decides
        try:
            info = os.stat(where)
        except (OSError, ValueError):
            continue  # as subprocess: not there, try the next
        if not stat.S_ISREG(info.st_mode) or not os.access(where, os.X_OK):
            return None  # subprocess would try the next; setpriv would not: the ordinary way decides
        return candidate if _settled(where) and _execs(where) else None
    return None


def _settled(path: str) -> bool:
    """Whether ``path`` is, for the exec from setpriv, the file found here: not reached through
    procfs (``/proc/self/exe``, ``/dev/fd/N``, ``/proc/self/fd/N`` name the process that resolves
    them: setpriv, whose descriptors are the child's), and not open for writing anywhere (the
    kernel refuses it, ``ETXTBSY``, and setpriv would report that as its own exit 126)."""
    return not _through_proc(path) and not _busy(path)


def _through_proc(path: str) -> bool:
    """Whether resolving ``path`` (its links followed as the kernel follows them) enters procfs."""
    try:
        proc = os.stat("/proc").st_dev
    except OSError:
        return False  # no procfs: nothing resolves per process
    parts = [part for part in path.split("/") if part not in ("", ".")][::-1]
    links = 0
    try:
        here = "/" if path.startswith("/") else os.getcwd()  # always a path with its links resolved
        if os.lstat(here).st_dev == proc:
            return True
        while parts:
            part = parts.pop()
            if part == "..":
                here = os.path.dirname(here)
                continue
            step = os.path.join(here, part)
            info = os.lstat(step)
            if info.st_dev == proc:
                return True
            if stat.S_ISLNK(info.st_mode):
                links += 1
                if links > 40:  # ELOOP for the kernel too, short of procfs
                    return False
                target = os.readlink(step)
                parts.extend([part for part in target.split("/") if part not in ("", ".")][::-1])
                if target.startswith("/"):
                    here = "/"
                continue
            here = step
    except (OSError, ValueError):
        return False  # missing (or looping) short of procfs: so it is for the child too
    return False


def _busy(path: str) -> bool:
    """Whether ``path`` is open for writing (by any process): a read lease is refused then. Where
    no lease can be taken (another's file without ``CAP_LEASE``, a filesystem without leases) it
    is taken as not busy."""
    try:
        import fcntl
    except ImportError:
        return False
    try:
        stream = untrusted.open_stream(path, _EXECUTABLE)
    except untrusted.Unreadable:
        return False  # not readable here: the kernel's exec needs no read, and is left to decide
    with stream:
        try:
            fcntl.fcntl(stream.fileno(), fcntl.F_SETLEASE, fcntl.F_RDLCK)
        except OSError as error:
            return error.errno in (errno.EAGAIN, errno.EBUSY)
        fcntl.fcntl(stream.fileno(), fcntl.F_SETLEASE, fcntl.F_UNLCK)
        return False


def _execs(path: str) -> bool:
    """Whether the kernel runs ``path``: an image of this interpreter's kind that it will load, or a
    ``#!`` line naming one by its absolute path (a script run by a script is left to the ordinary way).

    Whatever the kernel refuses here setpriv reports as its own exit 126/127, and one it refuses as
    not an image (``ENOEXEC``: an object file, a binary cut short) setpriv's ``execvp`` hands to
    ``/bin/sh`` to run as a script; so an image is read as far as the kernel reads it before it
    commits to the exec (its program headers, the loader they name)."""
    try:
        head = untrusted.read_head(path, _EXECUTABLE, _HEAD)
    except untrusted.Unreadable:
        return False
    if _native(head):
        return _loads(path, head, loader=True)
    if not head.startswith(b"#!") or b"\n" not in head:
        return False  # the kernel refuses it (ENOEXEC); setpriv's execvp would hand it to /bin/sh
    # The kernel ends the interpreter's name at a space or a tab (or the line's end) only: a
    # carriage return (a script saved with CRLF), vertical tab or form feed is part of the name.
    line = head[2:].split(b"\n", 1)[0].lstrip(b" \t")
    interpreter = line.replace(b"\t", b" ").split(b" ", 1)[0]
    if not interpreter.startswith(b"/") or any(blank in interpreter for blank in (b"\r", b"\x0b", b"\x0c")):
        return False
    where = os.fsdecode(interpreter)
    try:
        if not stat.S_ISREG(os.stat(where).st_mode) or not os.access(where, os.X_OK) or not _settled(where):
            return False
        start = untrusted.read_head(where, _EXECUTABLE, _HEAD)
        return _native(start) and _loads(where, start, loader=True)
    except (OSError, ValueError, untrusted.Unreadable):
        return False


_PAGE = 4096  # the most program headers the kernel reads (ELF_MIN_ALIGN)
_PATH_MAX = 4096


def _loads(path: str, head: bytes, *, loader: bool) -> bool:
    """Whether the kernel gets past an image's headers (``head``: its first bytes, of this machine's
    kind): an executable or shared object, whole program headers, and (``loader``) the loader its
    ``PT_INTERP`` names present, of this machine's kind and as loadable. Anything else fails the
    exec (``ENOEXEC``, ``EIO``, ``ENOENT``)."""
    wide, little = head[4] == 2, head[5] == 1

    def number(data: bytes, at: int, size: int) -> int:
        return int.from_bytes(data[at : at + size], "little" if little else "big")

    if len(head) < (64 if wide else 52) or number(head, 16, 2) not in (2, 3):  # ET_EXEC, ET_DYN
        return False
    offset = number(head, 32, 8) if wide else number(head, 28, 4)
    entry, count = (number(head, 54, 2), number(head, 56, 2)) if wide else (number(head, 42, 2), number(head, 44, 2))
    if entry != (56 if wide else 32) or not 0 < entry * count <= _PAGE or offset > 16 * _PAGE:
        return False
    try:
        size = os.stat(path).st_size
        headers = untrusted.read_head(path, _EXECUTABLE, offset + entry * count)
        if len(headers) < offset + entry * count or size < offset + entry * count:
            return False  # cut short: the kernel's read of its program headers fails
        if not loader:
            return True
        for at in range(offset, offset + entry * count, entry):
            if number(headers, at, 4) != 3:  # PT_INTERP
                continue
            where, length = (
                (number(headers, at + 8, 8), number(headers, at + 32, 8))
                if wide
                else (number(headers, at + 4, 4), number(headers, at + 16, 4))
            )
            if not 2 <= length <= _PATH_MAX or where > 16 * _PAGE:
                return False
            text = untrusted.read_head(path, _EXECUTABLE, where + length)[where:]
            if len(text) != length or not text.endswith(b"\0") or not text.startswith(b"/"):
                return False
            name = os.fsdecode(text[:-1])
            if not stat.S_ISREG(os.stat(name).st_mode) or not os.access(name, os.X_OK) or not _settled(name):
                return False
            start = untrusted.read_head(name, _EXECUTABLE, _HEAD)
            return _native(start) and _loads(name, start, loader=False)
        return True  # a static image: no loader to find
    except (OSError, ValueError, untrusted.Unreadable):
        return False


def _native(head: bytes) -> bool:
    """Whether a file's first bytes are an executable image of this interpreter's own kind."""
    if "native" not in _found:
        try:
            _found["native"] = _image_kind(untrusted.read_head("/proc/self/exe", _EXECUTABLE, _HEAD))
        except untrusted.Unreadable:
            _found["native"] = None
    return _found["native"] is not None and _image_kind(head) == _found["native"]


def _image_kind(head: bytes) -> bytes | None:
    """An ELF header's identification (magic, class, byte order) and machine: what the kernel
    checks before it runs an image (any other is ``ENOEXEC``, which setpriv would hand to /bin/sh)."""
    return head[:6] + head[18:20] if len(head) >= 20 else None


def _die_with_parent() -> None:  # runs in the child between fork and exec
    # Held in this thread (shielded) when it forked, or left blocked by the tool's own parent: a
    # program starts with none blocked.
    signal.pthread_sigmask(signal.SIG_SETMASK, ())
    prctl = _found.get("prctl")
    if callable(prctl):
        prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        # A tool that died between the fork and here sends no death signal (this child has a new
        # parent already): end as it would have ended us.
        if os.getppid() != _found.get("parent"):
            os.kill(os.getpid(), signal.SIGKILL)


def _prepare_prctl() -> None:
    """Look prctl up before any fork (the child must not load libraries)."""
    if "prctl" not in _found:
        _found["prctl"] = None
        if sys.platform.startswith("linux"):
            try:
                import ctypes  # Start-up cost: 7.0M instructions, paid where setpriv cannot be used.

                _found["prctl"] = ctypes.CDLL(None, use_errno=True).prctl
            except (OSError, AttributeError):
                pass


def as_asked(argv: Sequence[str], program: list[str], start: Callable[[], Started]) -> Callable[[], Started]:
    """``start``, whose argv too long for the kernel names the program asked for (``argv[0]``), as
    ``subprocess`` names it, not the setpriv that ``program`` starts it through (whose own exec
    fails). Any other failure of setpriv's exec is setpriv's, and says so."""

    def started() -> Started:
        try:
            return start()
        except OSError as error:
            if error.errno == errno.E2BIG and error.filename == program[0] and program[0] != argv[0]:
                error.filename = argv[0]
            raise

    return started
