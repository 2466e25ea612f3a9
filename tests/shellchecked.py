"""shellcheck of a generated script, run once per script's bytes in a test process, and the bash
script the CLI writes for a target.

The same script reaches several tests: ``script --format bash`` and the script cloud-init embeds
are the same bytes for one target. shellcheck's verdict is a function of the bytes (about a third
of a second of CPU for each script here), so a second test of the same bytes reads the first's.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import subprocess
from pathlib import Path

from exporthelpers import shellcheck

from tfgpu import cli

TARGET = ("--no-detect", "--os", "linux", "--arch", "x86_64")
"""A Linux x86_64 target with no host detection (tests/exporthelpers.py's resolution)."""

_CHECKED: dict[str, subprocess.CompletedProcess] = {}


def check(script: str, tmp_path: Path) -> subprocess.CompletedProcess:
    """shellcheck at its default severity of ``script`` (see ``exporthelpers.shellcheck``)."""
    key = hashlib.sha256(script.encode()).hexdigest()
    if key not in _CHECKED:
        _CHECKED[key] = shellcheck(script, tmp_path)
    return _CHECKED[key]


def bash_script(tf: str, mode: str) -> str:
    """What ``tfgpu-install script --tf TF --mode MODE --format bash`` prints for :data:`TARGET`."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = cli.main(["script", "--tf", tf, "--mode", mode, *TARGET, "--format", "bash"])
    assert code == 0, out.getvalue()
    return out.getvalue()
