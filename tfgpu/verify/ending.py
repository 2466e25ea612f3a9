"""How a check's child process ended, in words, for ``verify`` and ``verify --with``: an exit with its
code, a crash with its signal, a hang only where the runner stopped it at its timeout, and the tail
of what it wrote to stderr (a framework's message before it exited).

The runner (:meth:`tfgpu.process.runner.Runner.capture`) gives a child it stopped at its timeout status 124,
and a framework's import may exit with 124 itself: the time it ran tells them apart.
"""

from __future__ import annotations

import re
import signal

from tfgpu.doors.controls import character_class


def stopped_at_timeout(done, timeout: float) -> bool:
    """Whether the runner stopped ``done`` at ``timeout``. It gives such a child status 124, but a
    framework may exit 124 itself (``sys.exit(124)`` at import): only a child that ran the whole
    timeout was stopped."""
    return done.returncode == 124 and done.seconds >= timeout


def ended(done, timeout: float) -> str:
    """How a check's process ended, in words: an exit with its code, a crash with its signal, or a
    hang (only a real timeout)."""
    code = done.returncode
    if stopped_at_timeout(done, timeout):
        return f"stopped after {timeout:.0f} s (a hang)"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name} (a crash)"
        except ValueError:
            return f"killed by signal {-code} (a crash)"
    return f"exit {code}"


STDERR_TAIL = 4
"""The last lines of a check's stderr said with an exit or a crash (all of it is in the log)."""


def stderr_tail(done) -> str:
    """The last :data:`STDERR_TAIL` non-empty lines of ``done``'s stderr, on one line, controls out
    and cut to 400 characters: what said why it exited (a framework's message before sys.exit)."""
    lines = [line.strip() for line in done.stderr.splitlines()[-200:] if line.strip()][-STDERR_TAIL:]
    text = re.sub(character_class(), "", " | ".join(lines))
    return text if len(text) <= 400 else "…" + text[-399:]
