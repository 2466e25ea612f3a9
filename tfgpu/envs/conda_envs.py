"""Where conda keeps its environments on this machine, and which conda-family executable to drive."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from tfgpu.doors import untrusted
from tfgpu.doors.paths import user_path


def conda_envs_dir() -> Path | None:
    """The envs directory of the conda installation on this host (so ``conda activate NAME`` and
    ``conda env list`` find the env), or None when there is none: where ``create --mode conda
    --name N`` puts a new env (the first of :func:`conda_envs_dirs`)."""
    dirs = conda_envs_dirs()
    return dirs[0] if dirs else None


def conda_envs_dirs() -> list[Path]:
    """Every envs directory of the conda installation, in conda's order: the entries of
    ``CONDA_ENVS_PATH`` (or ``CONDA_ENVS_DIRS``), then the installation's own ``envs/`` (micromamba:
    ``$MAMBA_ROOT_PREFIX/envs``). Empty when there is no conda. The variables' paths go through
    ``tfgpu.doors.paths.user_path`` (``bad-path`` naming the variable)."""
    found: list[Path] = []
    for variable in ("CONDA_ENVS_PATH", "CONDA_ENVS_DIRS"):
        listed = os.environ.get(variable)
        if listed:
            # Absolute and normalised: a relative entry would make a prefix that depends on the
            # working directory, and one directory spelled two ways must not count twice.
            found += [
                Path(os.path.normpath(Path(user_path(entry, variable)).expanduser().absolute()))
                for entry in listed.split(os.pathsep)
                if entry
            ]
            break
    root = _installation_envs()
    if root is not None:
        found.append(root)
    unique: dict[str, Path] = {}
    for directory in found:
        unique.setdefault(os.path.realpath(directory), directory)  # a link to a directory listed already
    return list(unique.values())


def _installation_envs() -> Path | None:

    if os.environ.get("MAMBA_ROOT_PREFIX") and not os.environ.get("CONDA_EXE"):
        return Path(user_path(os.environ["MAMBA_ROOT_PREFIX"], "MAMBA_ROOT_PREFIX")) / "envs"
    exe = os.environ.get("CONDA_EXE") or shutil.which("conda") or shutil.which("mamba")
    if exe:
        # os.path.realpath, not Path.resolve: a link loop is not an installation, not a RuntimeError.
        root = Path(os.path.realpath(user_path(exe, "CONDA_EXE"))).parent.parent
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
