"""A guard that fails a test when the code under it hangs, and says nothing about how fast it was.

Tests here never assert a duration: a bound tight enough to mean "fast" fails on a loaded machine,
and one loose enough never to fail says nothing. Where a test's point is "this ends" (a regular
expression that must not backtrack, a lock that must not be waited on, a server that never stops
sending), it runs the code under :func:`hang_guard`, whose limit is minutes, and makes the input
large enough that the bug it holds would be a hang, not a few seconds more. Where the point is a
count (bytes hashed, connections opened, combinations weighed), the test counts that instead.
"""

from __future__ import annotations

import contextlib
import signal

HANG_S = 120
"""What only a hang passes: about a hundred times what the guarded code takes on a busy 2-core machine."""


class Hung(BaseException):
    """Raised in the test's own thread when the guarded block has run past its limit. Not an
    ``Exception``: the code under the guard may catch those (a retry loop would swallow the hang)."""


@contextlib.contextmanager
def hang_guard(what: str, seconds: float = HANG_S):
    """Run the block under SIGALRM: past ``seconds`` it raises :class:`Hung` naming ``what``. The
    alarm reaches Python code and the regular-expression engine (which checks for signals as it
    runs) and interrupts a blocking system call; it works in the main thread only, where pytest
    runs a test."""

    def alarm(*_):
        raise Hung(f"{what}: did not end within {seconds:g} s (a hang guard, not a timing)")

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
