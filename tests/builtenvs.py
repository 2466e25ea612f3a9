"""Users' envs built once and copied: what ``repairhelpers.user_venv`` makes, for tests that each
need one of their own to change.

Building one is two uv processes and an interpreter query (about 0.14 s of CPU); copying one is a
hundredth of that. The first env asked for with a given wheel directory, requirements and name is
built for real, by ``repairhelpers.user_venv``, into a template directory beside the wheels; each
env asked for is a copy of it whose activation scripts (the only files of a venv that name its
path: uv writes ``VIRTUAL_ENV='<path>'`` into ``bin/activate*``) name its own path. The copy is then
the env uv would have built there, file for file and byte for byte, but for uv's
``*.dist-info/uv_cache.json`` (which cache entry a wheel came from: the template's), which
``repairhelpers.snapshot`` leaves out too; tests/test_closed_env.py holds that. A path uv would
quote differently from the template's (anything but letters, digits and ``_./+-``) is built for real.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import sys
from pathlib import Path

import repairhelpers as rh

_PLAIN = re.compile(r"[A-Za-z0-9_./+-]+")


def _plain(path: Path) -> bool:
    return path.is_absolute() and bool(_PLAIN.fullmatch(str(path))) and os.path.realpath(path) == str(path)


def _template_key(wheels: Path, requirements: tuple[str, ...], name: str) -> str:
    listing = sorted((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in wheels.glob("*.whl"))
    text = repr((str(wheels), listing, requirements, name, sys.executable))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def user_venv(prefix: Path, wheels: Path, *requirements: str, env: dict | None = None) -> Path:
    """``repairhelpers.user_venv(prefix, wheels, *requirements, env=env)``, copied from a template
    where it can be (see the module docstring)."""
    prefix = Path(prefix)
    template = wheels.with_name(f"{wheels.name}-user-venvs") / _template_key(wheels, requirements, prefix.name)
    built = template / prefix.name
    if not (_plain(prefix) and _plain(built)):
        return rh.user_venv(prefix, wheels, *requirements, env=env)
    if not (template / "complete").exists():
        shutil.rmtree(template, ignore_errors=True)
        rh.user_venv(built, wheels, *requirements, env=env)
        (template / "complete").write_text("")
    shutil.copytree(built, prefix, symlinks=True)
    old, new = str(built).encode(), str(prefix).encode()
    for script in (prefix / "bin").glob("activate*"):
        if script.is_file() and not script.is_symlink():
            script.write_bytes(script.read_bytes().replace(old, new))
    return prefix
