"""Where conda keeps its environments on this machine, and which conda-family executable to drive."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from tfgpu import untrusted


def conda_envs_dir() -> Path | None:
    """The envs directory of the conda installation on this host (so ``conda activate NAME`` and
    ``conda env list`` find the env), or None when there is none."""
    listed = os.environ.get("CONDA_ENVS_PATH") or os.environ.get("CONDA_ENVS_DIRS")
    if listed:
        return Path(listed.split(os.pathsep)[0]).expanduser()
    if os.environ.get("MAMBA_ROOT_PREFIX") and not os.environ.get("CONDA_EXE"):
        return Path(os.environ["MAMBA_ROOT_PREFIX"]) / "envs"
    exe = os.environ.get("CONDA_EXE") or shutil.which("conda") or shutil.which("mamba")
    if exe:
        root = Path(exe).resolve().parent.parent
        if (root / "conda-meta").is_dir() or (root / "envs").is_dir():
            return root / "envs"
    return None


def register_env(prefix: Path) -> None:
    """Add the env to ``~/.conda/environments.txt``, where ``conda env list`` looks."""
    listing = Path.home() / ".conda" / "environments.txt"
    try:
        known = untrusted.read_text(listing, untrusted.SYSTEM_FILE).splitlines() if listing.exists() else []
        if str(prefix) not in known:
            listing.parent.mkdir(parents=True, exist_ok=True)
            with listing.open("a", encoding="utf-8") as out:
                out.write(f"{prefix}\n")
    except (OSError, untrusted.Unreadable):
        pass  # a read-only home only costs the `conda env list` entry


def find_engine(engine: str) -> str | None:
    """The ``conda``/``mamba``/``micromamba`` executable: on PATH, else ``$CONDA_EXE``/``$MAMBA_EXE``."""
    found = shutil.which(engine)
    if found:
        return found
    for variable in ("CONDA_EXE", "MAMBA_EXE"):
        path = os.environ.get(variable)
        if path and Path(path).name.split(".")[0] == engine and Path(path).is_file():
            return path
    return None
