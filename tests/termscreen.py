"""What a person sees: a command run on a real pseudo-terminal of a given size, everything it draws
fed to a terminal emulator (``pyte``) with a scrollback, and the screen read back as text.

Why an emulator: a progress display is right or wrong in what it leaves on the screen and in the
scrollback (a bar redrawn in place, or a thousand stacked copies of it), not in the calls it makes
nor in the bytes it writes. ``pyte`` interprets the cursor moves, erases and line wraps as a VT100
terminal does (xterm and tmux agree with it on these), so the tests read the rendered rows.
"""

from __future__ import annotations

import errno
import fcntl
import os
import pty
import select
import signal
import struct
import subprocess
import termios
import time
from dataclasses import dataclass, field


@dataclass
class Capture:
    """What the command left: its exit code, every screen seen while it ran (the rows, as text,
    one snapshot per read), the last screen, and the scrollback (the rows that scrolled off the top)."""

    returncode: int
    columns: int
    snapshots: list[list[str]] = field(default_factory=list)
    screen: list[str] = field(default_factory=list)
    history: list[str] = field(default_factory=list)
    raw: bytes = b""

    @property
    def scrollback(self) -> list[str]:
        """Every row a person can scroll back to, then the screen: the whole session's text."""
        return self.history + self.screen

    def text(self) -> str:
        return "\n".join(row.rstrip() for row in self.scrollback).rstrip() + "\n"


def _row(line, columns: int) -> str:
    return "".join(line[x].data for x in range(columns))


def run(
    argv: list[str], env: dict[str, str], columns: int, lines: int = 40, timeout: float = 300, every: float = 0.05
) -> Capture:
    """Run ``argv`` with a pseudo-terminal of ``columns`` x ``lines`` as its stdin, stdout and
    stderr (``TERM=xterm-256color``, ``COLUMNS``/``LINES`` set as a shell sets them), and render
    what it draws. A snapshot of the screen is taken at most every ``every`` seconds. ``timeout``
    only catches a hang (the command is killed and the test fails on its exit code)."""
    import pyte

    screen = pyte.HistoryScreen(columns, lines, history=100_000, ratio=0.5)
    stream = pyte.ByteStream(screen)
    master, child = pty.openpty()
    fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", lines, columns, 0, 0))
    env = {**env, "TERM": "xterm-256color", "COLUMNS": str(columns), "LINES": str(lines)}
    for name in ("TTY_COMPATIBLE", "FORCE_COLOR", "NO_COLOR", "TMUX"):
        env.pop(name, None)
    process = subprocess.Popen(argv, stdin=child, stdout=child, stderr=child, env=env, start_new_session=True)
    os.close(child)
    raw = bytearray()
    snapshots: list[list[str]] = []
    last = 0.0
    deadline = time.monotonic() + timeout
    try:
        while True:
            if time.monotonic() > deadline:
                os.killpg(process.pid, signal.SIGKILL)
                break
            ready, _, _ = select.select([master], [], [], 0.5)
            if not ready:
                continue
            try:
                chunk = os.read(master, 1 << 16)
            except OSError as error:  # EIO: every holder of the child's end closed it
                if error.errno != errno.EIO:
                    raise
                break
            if not chunk:
                break
            raw += chunk
            stream.feed(chunk)
            now = time.monotonic()
            if now - last >= every:
                snapshots.append(list(screen.display))
                last = now
    finally:
        os.close(master)
        returncode = process.wait(timeout=60)
    snapshots.append(list(screen.display))
    history = [_row(line, columns) for line in screen.history.top]
    return Capture(returncode, columns, snapshots, list(screen.display), history, bytes(raw))
