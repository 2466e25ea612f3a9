"""Find a working Python X.Y for a new env, or say that uv will provide one."""

from __future__ import annotations

import sys

from tfgpu.detect import System
from tfgpu.detect.platform_facts import find_interpreters
from tfgpu.errors import ImpossibleError


def find_python(version: str) -> str | None:
    """The path of an installed, working Python ``version`` ("3.12"), or None.

    The running interpreter first; then the ones detection finds (PATH, pyenv, uv-managed),
    each run once to make sure it is what its name says.
    """
    if f"{sys.version_info.major}.{sys.version_info.minor}" == version:
        # In a venv (as when tfgpu-install is installed in one) base the new env on the real interpreter.
        return getattr(sys, "_base_executable", None) or sys.executable

    system = System()
    path = find_interpreters(system).get(version)
    if path and _reports(system, path, version):
        return path
    return None


def _reports(system, path: str, version: str) -> bool:
    done = system.run([path, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"], timeout=30)
    return done is not None and done.returncode == 0 and done.stdout.strip() == version


def require_python(version: str, *, can_download: bool) -> str | None:
    """A local interpreter path, or None when uv may download a managed one; else an error."""
    path = find_python(version)
    if path is not None or can_download:
        return path
    raise ImpossibleError(
        "python-not-found",
        f"This plan needs Python {version}, which is not installed here, and uv cannot download a "
        "managed interpreter (--offline, or --engine pip).",
        [
            f"Install Python {version} (your package manager, pyenv, or `uv python install {version}`).",
            "Or drop --offline / --engine pip so uv can provide a managed Python.",
            "Or choose another Python the release supports with --python.",
        ],
    )
