"""Holding SIGINT, SIGTERM and SIGHUP back where the tool must not be cut in half: a few renames
(``shielded``), and the start of a child (``supervised``, used by ``tfgpu.process.runner``, the door that
starts every child).
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Callable, Iterator

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextlib.contextmanager
def shielded() -> Iterator[None]:
    """Hold SIGINT/SIGTERM/SIGHUP until the block is done: for the few renames that must not be
    cut in half (commit, rollback); a signal that arrived meanwhile is delivered afterwards."""
    try:
        old = signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)
    except (AttributeError, OSError, ValueError):
        yield
        return
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def supervised(start: Callable, stop: Callable):
    """``start()`` a child with SIGINT/SIGTERM/SIGHUP held, and let them in only once the child is in
    hand: a signal that came while it was forked is handled here, where ``stop`` stops (and reaps)
    the child before the interrupt propagates. Delivered any earlier, the interrupt would leave a
    child nobody supervises (``uv venv`` writing on into a staging directory while the rollback
    deletes it). Held, too, because Python runs its at-fork hooks (logging's lock release) right
    after ``fork``, and a handler that raises inside such a hook has its exception printed and
    dropped ("Exception ignored in _releaseLock"). The child unblocks them before ``exec``
    (``tfgpu.process.runner._die_with_parent``)."""
    try:
        old = signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)
    except (AttributeError, OSError, ValueError):
        return start()
    try:
        child = start()
    except BaseException:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
        raise
    try:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)  # a held signal's handler runs (and raises) here
    except BaseException:
        stop(child)
        raise
    return child
