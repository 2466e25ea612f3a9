"""How a run is stopped: SIGTERM and SIGHUP become :class:`Interrupted`, a ``KeyboardInterrupt``.

So ``timeout``, ``systemd stop`` and a closed terminal roll back exactly like Ctrl-C (``tfgpu.cli``
turns it into exit 128 + the signal's number). Every command installs these handlers before it does
anything, so this module is kept to what that needs: it uses ``_signal``, the C module behind
``signal``, because ``import signal`` builds three enum classes of every signal and handler on the
way (about 1.5 ms, a tenth of what `plan` may spend beyond the interpreter's start). The rest of
the signal handling (masks, a child's death signal) lives with the child processes in ``tfgpu.proc``.
"""

from __future__ import annotations

import _signal

SIGINT, SIGHUP, SIGTERM = _signal.SIGINT, _signal.SIGHUP, _signal.SIGTERM
_NAMES = {SIGINT: "SIGINT", SIGHUP: "SIGHUP", SIGTERM: "SIGTERM"}


class Interrupted(KeyboardInterrupt):
    """SIGTERM or SIGHUP, handled like Ctrl-C; ``signum`` decides the exit code (128 + signum)."""

    def __init__(self, signum: int = SIGINT) -> None:
        super().__init__(_NAMES.get(signum, f"signal {signum}"))
        self.signum = signum


def install_signal_handlers() -> None:
    """SIGTERM/SIGHUP raise :class:`Interrupted` in the main thread (SIGINT already raises)."""

    def handler(signum, _frame):
        raise Interrupted(signum)

    for signum in (SIGTERM, SIGHUP):
        try:
            _signal.signal(signum, handler)
        except (ValueError, OSError):  # not the main thread / not supported
            pass
