"""conda-family executables: conda, mamba, micromamba and pixi."""

from __future__ import annotations

import os

from tfgpu.detect.host import CondaExe
from tfgpu.detect.system import System

NAMES = ("conda", "mamba", "micromamba", "pixi")


def find_conda(system: System) -> tuple[CondaExe, ...]:
    """$CONDA_EXE, $MAMBA_EXE, then each name on PATH; one entry per real file."""
    candidates: list[tuple[str, str]] = []
    for variable, default in (("CONDA_EXE", "conda"), ("MAMBA_EXE", "micromamba")):
        path = system.env(variable)
        if path and system.is_file(path):
            candidates.append((_name_of(path, default), path))
    for name in NAMES:
        path = system.which(name)
        if path:
            candidates.append((name, path))

    seen: set[str] = set()
    found = []
    for name, path in candidates:
        real = system.realpath(path)
        if real not in seen:
            seen.add(real)
            found.append(CondaExe(name, path))
    return tuple(found)


def _name_of(path: str, default: str) -> str:
    stem = os.path.basename(path).lower()
    for suffix in (".exe", ".bat"):
        stem = stem.removesuffix(suffix)
    return stem if stem in NAMES else default
