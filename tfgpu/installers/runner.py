"""The one way installers run commands: argv lists, a cleaned environment, every command and its
whole output kept in a log file, output lines streamed to the reporter. It never raises for a
failing command: the caller reads ``Completed.returncode`` and decides.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

# Variables that would make a child install somewhere else or import the wrong code.
_DROP = ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONUSERBASE", "VIRTUAL_ENV", "CONDA_PREFIX",
         "CONDA_DEFAULT_ENV", "CONDA_SHLVL", "__PYVENV_LAUNCHER__", "UV_PROJECT_ENVIRONMENT", "UV_SYSTEM_PYTHON")
# pip settings that only choose where packages come from (a mirror, a certificate) are kept.
_KEEP_PIP = ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_TRUSTED_HOST", "PIP_CERT", "PIP_CLIENT_CERT",
             "PIP_DEFAULT_TIMEOUT", "PIP_RETRIES", "PIP_PROXY")


def clean_environment(base: Mapping[str, str], extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` without the variables that leak another environment into a child."""
    env = {
        key: value for key, value in base.items()
        if key not in _DROP and not (key.startswith("PIP_") and key not in _KEEP_PIP)
    }
    env.update(extra or {})
    return env


@dataclass(frozen=True)
class Completed:
    argv: tuple[str, ...]
    returncode: int
    output: str
    seconds: float

    def tail(self, lines: int = 12) -> str:
        return "\n".join(self.output.rstrip().splitlines()[-lines:])


class Runner:
    """Runs commands for an installer; one log file per operation."""

    def __init__(self, log_path: Path, extra_env: Mapping[str, str] | None = None) -> None:
        self.log_path = log_path
        self.extra_env = dict(extra_env or {})
        log_path.parent.mkdir(parents=True, exist_ok=True)

    def log(self, text: str) -> None:
        with open(self.log_path, "a", encoding="utf-8") as log:
            log.write(text if text.endswith("\n") else text + "\n")

    def run(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None,
            on_line: Callable[[str], None] | None = None) -> Completed:
        """Run ``argv``; stdout and stderr merged, streamed line by line to ``on_line``.

        Ctrl-C stops the child too (it is in our process group and gets the SIGINT; we wait for
        it, and kill it if it lingers) and then propagates as KeyboardInterrupt.
        """
        argv = tuple(str(a) for a in argv)
        self.log(f"$ {shlex.join(argv)}")
        start = time.monotonic()
        lines: list[str] = []
        try:
            child = subprocess.Popen(
                argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env=clean_environment(os.environ, {**self.extra_env, **(env or {})}),
                text=True, encoding="utf-8", errors="replace", bufsize=1,
            )
        except OSError as error:
            self.log(f"could not start: {error}")
            return Completed(argv, 127, f"could not start {argv[0]}: {error}", 0.0)
        try:
            for line in child.stdout:
                lines.append(line)
                if on_line is not None:
                    on_line(line.rstrip("\n"))
            returncode = child.wait()
        except KeyboardInterrupt:
            _stop(child)
            self.log("interrupted")
            raise
        output = "".join(lines)
        seconds = time.monotonic() - start
        self.log(output + f"[exit {returncode} after {seconds:.1f} s]")
        return Completed(argv, returncode, output, seconds)


def _stop(child: subprocess.Popen) -> None:
    """After Ctrl-C: a terminal sent the child SIGINT too, a `kill -INT` of our pid did not."""
    try:
        child.send_signal(signal.SIGINT)
        child.wait(timeout=5)
    except (subprocess.TimeoutExpired, KeyboardInterrupt):
        child.kill()
        child.wait()
    except ProcessLookupError:
        pass
