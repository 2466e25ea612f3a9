"""An env in use: ``run`` and ``shell`` hold it while their program runs, and ``remove`` respects that.

The hold is a shared ``flock`` on ``.T.tfgpu-inuse`` beside the env T (any number of ``run`` and
``shell`` at once); ``remove`` takes it exclusively, without waiting, while it already holds T's
target lock (``tfgpu.envs.txn.TargetLock``, the one create and repair take), and refuses with
``env-in-use`` naming the pids of the holders. Refusing, not waiting: a training run may last days,
and a ``remove`` that sat silent until then would look hung; the user decides whether to stop it.
The kernel drops a hold when its process dies (SIGKILL included), so no stale hold outlives a run;
each holder writes its pid into the file, only for the message (a pid no longer alive is not named).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
import time
from collections.abc import Iterator
from pathlib import Path

from tfgpu.doors import trees, untrusted
from tfgpu.errors import OperationError


def _not_a_file(hold: Path, what: str) -> OperationError:
    # Nothing can be locked on it, so nothing can tell whether the env is in use: a run going on
    # unheld, or a remove going on regardless, could delete an env a program is using.
    return OperationError(
        "hold-not-a-file",
        f"{hold} is {what}, not the file tfgpu-install holds while a `run` or `shell` uses the env; "
        "whether the env is in use cannot be told, so nothing was started and nothing was removed.",
        [
            f"If no `tfgpu-install run` or `shell` of this env is running, take it away (`rm -r {hold}`; "
            "a symlink's target is not touched) and run the same command again.",
        ],
    )


def _open(hold: Path) -> int | None:
    """The hold file, open; None where this user cannot make one (no hold, as before holds existed).
    Something other than a plain file at its name (planted, or another program's) is refused: the
    one place both sides open it, so neither goes on unheld."""
    try:
        fd = os.open(hold, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_APPEND | os.O_NONBLOCK, 0o644)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise _not_a_file(hold, "a symlink") from None
        if error.errno == errno.EISDIR:
            raise _not_a_file(hold, "a directory") from None
        if error.errno in (errno.ENXIO, errno.ENODEV, errno.EOPNOTSUPP):
            raise _not_a_file(hold, "a special file") from None
        return None  # a directory this user cannot write
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise _not_a_file(hold, "a FIFO or device")
    return fd


def _take_shared(final: Path, hold: Path, command: str) -> int | None:
    """An open hold file, locked shared and still the one at ``hold``; None where none can be made."""
    for _ in range(50):
        fd = _open(hold)
        if fd is None:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            same = os.fstat(fd).st_ino == os.stat(hold, follow_symlinks=False).st_ino
        except (BlockingIOError, FileNotFoundError):
            same = False  # a remove holds it, or the last run was tidying it away: look again
        if same:
            return fd
        os.close(fd)
        if not final.exists():
            break
        time.sleep(0.02)
    raise OperationError(
        "env-busy",
        f"{final} is being removed by another tfgpu-install right now; {command} did not start.",
        ["Wait for it to finish, then run the same command again (`tfgpu-install list` shows what is left)."],
    )


@contextlib.contextmanager
def using(final: Path, hold: Path, command: str) -> Iterator[None]:
    """Hold the env at ``final`` for ``run`` or ``shell`` (``command``) while the block runs (``hold``:
    its file, ``tfgpu.envs.txn.hold_of``); a ``remove`` deleting it right now makes this ``env-busy``.
    The last holder to leave deletes the file, so an env nobody uses has none beside it."""
    fd = _take_shared(final, hold, command)
    if fd is None:
        yield
        return
    try:
        with contextlib.suppress(OSError):
            os.write(fd, f"{os.getpid()} {command}\n".encode())
        yield
    finally:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # nobody else holds it: tidy it away
            trees.unlink(hold, strict=False)
        except OSError:
            pass
        os.close(fd)


def _is_the_tool(pid: int) -> bool:
    """Whether ``pid`` is alive and a tfgpu-install (its command line, read through the door)."""

    try:
        argv = untrusted.read_head(f"/proc/{pid}/cmdline", untrusted.SYSTEM_FILE, 1 << 12)
    except untrusted.Unreadable:
        return False  # gone, or not ours to look at: not named
    return b"tfgpu" in argv


class Exclusive:
    """``remove``'s side: the env held by nobody else until ``release``; ``env-in-use`` otherwise."""

    def __init__(self, final: Path, hold: Path) -> None:
        self.final, self.hold = final, hold
        self.fd = _open(hold)
        if self.fd is None:
            return
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holders = self._holders()
            os.close(self.fd)
            self.fd = None
            who = ", ".join(f"`tfgpu-install {command}` (pid {pid})" for pid, command in holders) or "a program"
            raise OperationError(
                "env-in-use",
                f"{final} is in use by {who}; nothing was removed.",
                [
                    "Wait for that program to end (or stop it), then run the same `remove` again.",
                ],
            ) from None
        with contextlib.suppress(OSError):
            os.ftruncate(self.fd, 0)  # the pids of holds long gone

    def _holders(self) -> list[tuple[int, str]]:
        """The pids the file names that are a tfgpu-install now. Holders append, so the last 64 KiB
        hold the latest; a pid is named only if it is a tfgpu-install's (anyone who can write the file
        could name pid 1 or the user's editor, and the message tells the user to stop that program)."""
        assert self.fd is not None  # asked only while the hold is open
        try:
            end = os.fstat(self.fd).st_size
            data = os.pread(self.fd, 1 << 16, max(0, end - (1 << 16)))
            text = data.replace(b"\0", b"\n").decode("ascii", "replace")  # a hole's zeros end no line
        except OSError:
            return []
        found = []
        for line in text.splitlines():
            pid, _, command = line.partition(" ")
            if not pid.isdigit() or command not in ("run", "shell") or not _is_the_tool(int(pid)):
                continue
            if (int(pid), command) not in found:
                found.append((int(pid), command))
        return found

    def release(self) -> None:
        if self.fd is not None:
            trees.unlink(self.hold, strict=False)
            os.close(self.fd)
            self.fd = None
