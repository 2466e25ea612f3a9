"""Holding SIGINT, SIGTERM and SIGHUP back where the tool must not be cut in half: a few renames
(``shielded``), and the start of a child (``supervised``, used by ``tfgpu.process.runner``, the door that
starts every child).
"""

from __future__ import annotations

import contextlib
import os
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
    hand: a signal that came while it was started is handled here, where ``stop`` stops (and reaps)
    the child before the interrupt propagates. Delivered any earlier, the interrupt would leave a
    child nobody supervises (``uv venv`` writing on into a staging directory while the rollback
    deletes it).

    Held by the tool, not the kernel: while ``start()`` runs, the signals' handlers only note the
    signal, and the handler it would have met is called once the child is in hand (a default
    action is taken then: the process ends by the signal, its child stopped first). A signal
    blocked in the kernel would stay blocked in a child started with ``vfork``, through its exec
    (``tfgpu.process.spawning``); Python runs its handlers only between bytecodes, so one noted
    during the fork is handled after ``fork_exec`` returns, never inside the child or an at-fork
    hook. Outside the main thread (where no handler runs) nothing is held."""
    caught: list[int] = []
    held = _hold(caught)
    try:
        child = start()
    except BaseException:
        _let_in(held, caught, lambda: None)
        raise
    try:
        _let_in(held, caught, lambda: stop(child))
    except BaseException:
        stop(child)
        raise
    return child


def _hold(caught: list[int]) -> dict:
    """Replace the signals' handlers by one that notes them in ``caught``; returns the handlers
    replaced. An ignored signal stays ignored, and one whose handler is not Python's is left.

    The swap itself runs with the signals blocked in the kernel (no child is being started then):
    a handler run between two swaps would raise out of here and leave the ones swapped noting
    every later signal into a list nobody reads."""

    def note(signum, _frame) -> None:
        caught.append(signum)

    held: dict = {}
    with shielded():
        try:
            for signum in SIGNALS:
                handler = signal.getsignal(signum)
                if handler is None or handler == signal.SIG_IGN:
                    continue
                signal.signal(signum, note)
                held[signum] = handler
        except (ValueError, OSError):  # not the main thread: signals are handled in the main thread
            _put_back(held)
            return {}
        except BaseException:
            _put_back(held)
            raise
    return held


def _put_back(held: dict) -> None:
    for signum, handler in held.items():
        signal.signal(signum, handler)


def _let_in(held: dict, caught: list[int], stop: Callable[[], None]) -> None:
    """Put the handlers back, and hand a signal noted meanwhile to the one it would have met (for
    a default action, once ``stop()`` has stopped the child)."""
    if not held:
        return
    # Blocking runs now, while held, the handler of a signal that came during the last bytecodes
    # (pthread_sigmask checks for signals as it returns); the handlers are then put back with the
    # signals blocked in the kernel, so none runs half-way through (it would leave the rest noting
    # into a list nobody reads). One that comes meanwhile meets its own handler as they are let in.
    with shielded():
        _put_back(held)
    if not caught:
        return
    signum = caught[0]
    handler = held[signum]
    if callable(handler):
        handler(signum, None)  # the tool's: raises Interrupted (KeyboardInterrupt for SIGINT)
    else:  # SIG_DFL: end as the signal would have ended the process
        stop()
        os.kill(os.getpid(), signum)
