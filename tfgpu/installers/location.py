"""Where an environment lives, and how it gets there without ever being half-built.

An env is built in a staging directory beside its final prefix (same filesystem, so the final
move is a rename) and moved into place only when complete; any failure or Ctrl-C deletes the
staging directory. An existing env is replaced only with --force, only if tfgpu-install made it,
and only after the new one is complete.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from tfgpu.errors import ImpossibleError, UsageError
from tfgpu.installers.base import Location

MARKER = "tfgpu-env.json"
"""Written into every env tfgpu-install builds: what it is, and proof that we may remove it."""


def envs_dir() -> Path:
    """Where ``--name`` envs live (pip and system mode): the platformdirs data dir."""
    override = os.environ.get("TFGPU_ENVS_DIR")
    if override:
        return Path(override)
    from platformdirs import user_data_dir

    return Path(user_data_dir("tfgpu-install")) / "envs"


def prefix_for(name: str | None, prefix: str | None) -> tuple[Path, str]:
    """The env's path and display name from ``--name``/``--prefix``."""
    if prefix:
        path = Path(prefix).expanduser().absolute()
        return path, path.name
    if name:
        return envs_dir() / name, name
    raise UsageError("missing-location", "Say where the environment goes: --name N or --prefix P.",
                     ["--name tf213 puts it in tfgpu-install's envs directory; --prefix ./env anywhere."])


def read_marker(prefix: Path) -> dict | None:
    """The env's ``tfgpu-env.json``, or None when tfgpu-install did not build it."""
    try:
        return json.loads((prefix / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def locate(name: str | None, prefix: str | None, force: bool, in_place: bool = False) -> Location:
    """Check the target before anything is downloaded or written."""
    final, display = prefix_for(name, prefix)
    existing = False
    if final.exists() or final.is_symlink():
        if not final.is_dir():
            raise ImpossibleError("target-not-a-directory", f"{final} exists and is not a directory.",
                                  ["Choose another --prefix or --name."])
        if any(final.iterdir()):
            if read_marker(final) is None:
                raise ImpossibleError(
                    "target-not-empty",
                    f"{final} is not empty and was not built by tfgpu-install; it is left untouched "
                    "(--force replaces only environments tfgpu-install built).",
                    ["Choose another --prefix or --name, or empty that directory yourself."])
            if not force:
                raise ImpossibleError(
                    "env-exists", f"An environment already exists at {final}; it is left untouched.",
                    ["Add --force to rebuild it (the old one stays until the new one is complete).",
                     f"Or `tfgpu-install remove --prefix {final}` first, or choose another --name."])
            existing = True
    parent = _nearest_existing(final.parent)
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        raise ImpossibleError(
            "target-not-writable", f"Cannot create {final}: {parent} is not a writable directory.",
            ["Choose a --prefix in a directory you can write, or use --name (your own data directory)."])
    staging = final if in_place else final.parent / f".{final.name}.tfgpu-staging"
    return Location(prefix=final, staging=staging, name=display, existing=existing, in_place=in_place)


def _nearest_existing(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def _aside(location: Location) -> Path:
    return location.prefix.parent / f".{location.prefix.name}.tfgpu-old"


def prepare(location: Location) -> None:
    """Create an empty staging directory (clearing one left by a crashed run).

    In place: an old env (--force) is moved aside, and the engine creates the prefix itself.
    """
    if location.in_place:
        if location.prefix.exists():
            if _aside(location).exists():
                shutil.rmtree(_aside(location))
            os.rename(location.prefix, _aside(location))
        location.prefix.parent.mkdir(parents=True, exist_ok=True)
        return
    if location.staging.exists():
        shutil.rmtree(location.staging)
    location.staging.parent.mkdir(parents=True, exist_ok=True)
    location.staging.mkdir()


def commit(location: Location) -> None:
    """Move the finished env into place; an old one (--force) is deleted only afterwards."""
    final = location.prefix
    old = _aside(location)
    if location.in_place:
        shutil.rmtree(old, ignore_errors=True)
        return
    if final.exists() and not any(final.iterdir()):
        final.rmdir()
    if final.exists():
        if old.exists():
            shutil.rmtree(old)
        os.rename(final, old)
    os.rename(location.staging, final)
    if old.exists():
        shutil.rmtree(old, ignore_errors=True)


def rollback(location: Location) -> None:
    """Leave nothing behind: the staging directory goes; the final prefix was never touched
    (in place: the half-built prefix goes and the old env, if any, comes back)."""
    shutil.rmtree(location.staging, ignore_errors=True)
    if location.in_place and _aside(location).exists():
        os.rename(_aside(location), location.prefix)


def relocate_venv(staging: Path, final: Path) -> None:
    """Rewrite the staging path to the final one in a venv's scripts and ``pyvenv.cfg``.

    ``python -m venv`` writes absolute paths (activate scripts, entry-point shebangs); uv's
    ``--relocatable`` venvs need none of this, and it is harmless for them.
    """
    old, new = str(staging).encode(), str(final).encode()
    for path in [*sorted((staging / "bin").iterdir()), staging / "pyvenv.cfg"]:
        if path.is_symlink() or not path.is_file():
            continue
        data = path.read_bytes()
        if old in data and b"\0" not in data[:1024]:
            path.write_bytes(data.replace(old, new))
