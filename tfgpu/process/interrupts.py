"""How a run is stopped: SIGTERM and SIGHUP become :class:`Interrupted`, a ``KeyboardInterrupt``.

So ``timeout``, ``systemd stop`` and a closed terminal roll back exactly like Ctrl-C (``tfgpu.cli``
turns it into exit 128 + the signal's number). Every command installs these handlers before it does
anything. The rest of the signal handling (masks, a child's death signal) lives with the child
processes in ``tfgpu.process.runner``.
"""

from __future__ import annotations

import signal

SIGINT, SIGHUP, SIGTERM = int(signal.SIGINT), int(signal.SIGHUP), int(signal.SIGTERM)
_NAMES = {SIGINT: "SIGINT", SIGHUP: "SIGHUP", SIGTERM: "SIGTERM"}


class Interrupted(KeyboardInterrupt):
    """SIGTERM or SIGHUP, handled like Ctrl-C; ``signum`` decides the exit code (128 + signum)."""

    def __init__(self, signum: int = SIGINT) -> None:
        super().__init__(_NAMES.get(signum, f"signal {signum}"))
        self.signum = signum


def leave(stop: BaseException, what: str) -> None:
    """Say, on an interrupt on its way out, what it leaves behind and where (``tfgpu.cli`` shows
    it in place of "nothing was left half-built", which is true only of a rolled-back build)."""
    stop.__dict__.setdefault("tfgpu_left", []).append(what)


def tell(stop: BaseException, what: str) -> None:
    """Add what was cleaned up on the interrupt's way out (said after what is left)."""
    stop.__dict__.setdefault("tfgpu_told", []).append(what)


def left(stop: BaseException) -> tuple[list[str], list[str]]:
    """What :func:`leave` and :func:`tell` recorded on ``stop``."""
    return list(getattr(stop, "tfgpu_left", [])), list(getattr(stop, "tfgpu_told", []))


def install_signal_handlers() -> None:
    """SIGTERM/SIGHUP raise :class:`Interrupted` in the main thread, and SIGINT a KeyboardInterrupt.

    SIGINT is set too, not left to Python: Python raises on it only when the tool's parent left it
    at its default, and a shell starting a job without job control (``cmd &`` in a script), or a
    supervisor, may hand it over ignored; a ``kill -INT`` of the tool's pid (an IDE's stop button,
    ``timeout -s INT``) was then lost, and the run went on to exit 0."""
    try:
        signal.signal(SIGINT, signal.default_int_handler)
    except (ValueError, OSError):
        pass

    def handler(signum, _frame):
        raise Interrupted(signum)

    for signum in (SIGTERM, SIGHUP):
        try:
            signal.signal(signum, handler)
        except (ValueError, OSError):  # not the main thread / not supported
            pass
