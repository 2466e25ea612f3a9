"""The real command line on a real pseudo-terminal, as a person's terminal runs it, and a signal sent
to its pid alone (not its process group, as an IDE's stop button, ``timeout -s INT`` or a supervisor
send it) when a given text appears."""

from __future__ import annotations

import os
import pty
import re
import select
import signal
import subprocess
import sys
import time
from dataclasses import dataclass

HANG_GUARD_S = 240
"""Only catches a hang: a run that ignores its signal would otherwise go on to its end or for ever."""


@dataclass
class Ended:
    returncode: int
    screen: str
    """Everything drawn, escape sequences out, carriage returns as line ends."""
    signalled: bool


def _controlling_terminal(ignore_sigint: bool):
    def setup() -> None:
        import fcntl
        import termios

        fcntl.ioctl(0, termios.TIOCSCTTY, 0)  # the pty is its terminal, as a shell's is for its job
        if ignore_sigint:  # as a shell without job control hands SIGINT to a background job
            signal.signal(signal.SIGINT, signal.SIG_IGN)

    return setup


def run_and_signal(
    argv: list[str],
    env: dict[str, str],
    marker: str,
    signum: int,
    *,
    delay: float = 0.3,
    ignore_sigint: bool = False,
    piped: bool = False,
) -> Ended:
    """``python -m tfgpu *argv`` on a new pseudo-terminal (its controlling terminal, stdin, stdout and
    stderr; ``piped``: a pipe instead); ``signum`` goes to its pid ``delay`` seconds after ``marker``
    is shown."""
    if piped:
        reader, child_end = os.pipe()
    else:
        reader, child_end = pty.openpty()
    child = subprocess.Popen(
        [sys.executable, "-m", "tfgpu", *argv],
        stdin=subprocess.DEVNULL if piped else child_end,
        stdout=child_end,
        stderr=child_end,
        env={**env, "TERM": "xterm"},
        start_new_session=True,
        preexec_fn=None if piped else _controlling_terminal(ignore_sigint),
    )
    os.close(child_end)
    drawn, sent, began = b"", None, time.monotonic()
    try:
        while time.monotonic() - began < HANG_GUARD_S:
            if sent is None and marker.encode() in drawn:
                sent = time.monotonic() + delay
            if sent is not None and sent <= time.monotonic() and sent > 0:
                os.kill(child.pid, signum)
                sent = -1.0
            ready, _, _ = select.select([reader], [], [], 0.05)
            if not ready:
                continue
            try:
                chunk = os.read(reader, 1 << 16)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            drawn += chunk
    finally:
        os.close(reader)
        if child.poll() is None and time.monotonic() - began >= HANG_GUARD_S:
            child.kill()
    returncode = child.wait(timeout=60)
    text = re.sub(r"\x1b\[[0-?]*[ -/]*[@-~]", "", drawn.decode("utf-8", "replace")).replace("\r", "\n")
    return Ended(returncode, "\n".join(line for line in text.splitlines() if line.strip()), sent == -1.0)
