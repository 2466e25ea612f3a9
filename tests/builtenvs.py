"""Envs built once per module and handed to each test as a copy, where the env's existence (not its
building) is what the test starts from.

A real env costs a ``uv venv``, a ``uv pip install`` and, for one the tool builds, the tool's whole
``create``; a copy of one costs a directory walk. The env is always built for real (real uv, the
real command line), then kept aside whole; each test gets its own copy to attack, delete or repair:

* :func:`restore` puts the kept env back at the very path it was built at: byte for byte what a
  fresh build there leaves (the tool's marker and activation scripts name that path). Files are
  hard links to the kept ones where the test only deletes (a delete unlinks one name), copies where
  it may write into a file.
* :func:`relocated` copies a plain ``uv venv`` (an env the tool did not build) to another path:
  ``uv venv`` writes its path into the activation scripts only, and those bytes are rewritten, so
  the copy is what ``uv venv`` would have written there (no file of the copy names the old path).
* :func:`user_venv` is ``repairhelpers.user_venv`` (a user's own venv for repair and closed-env
  tests) built once per wheel directory, requirements and name into a template beside the wheels,
  each env asked for a :func:`relocated` copy of it. The copy is the env uv would have built there,
  file for file and byte for byte, but for uv's ``*.dist-info/uv_cache.json`` (which cache entry a
  wheel came from: the template's), which ``repairhelpers.snapshot`` leaves out too;
  tests/test_closed_env.py holds that. A path uv would quote differently from the template's
  (anything but letters, digits and ``_./+-``) is built for real.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import sys
from pathlib import Path

import repairhelpers as rh
from conftest import run_tool

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
    return relocated(built, built, prefix)


def clear(directory: Path) -> None:
    """Everything in ``directory`` deleted (what an earlier test left there: an env, a hold file, a
    FIFO, a link), the directory itself kept."""
    for entry in list(directory.iterdir()):
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


def keep(built: Path, kept: Path) -> Path:
    """Move the env at ``built`` to ``kept`` (same file system: a rename), to be restored from."""
    kept.parent.mkdir(parents=True, exist_ok=True)
    os.rename(built, kept)
    return kept


def restore(kept: Path, prefix: Path, *, link: bool) -> Path:
    """The env kept at ``kept`` put back at ``prefix`` (the path it was built at); ``link``: files
    are hard links to the kept ones (for a test that writes into no file of the env)."""
    shutil.copytree(kept, prefix, symlinks=True, copy_function=os.link if link else shutil.copy2)
    return prefix


def relocated(kept: Path, built_at: Path, prefix: Path) -> Path:
    """A copy at ``prefix`` of the plain ``uv venv`` kept at ``kept`` (built at ``built_at``), its
    activation scripts naming ``prefix``, as ``uv venv`` writes them there."""
    shutil.copytree(kept, prefix, symlinks=True)
    old, new = os.fsencode(built_at), os.fsencode(prefix)
    for script in (prefix / "bin").iterdir():
        if script.is_file() and not script.is_symlink():
            data = script.read_bytes()
            if old in data:
                script.write_bytes(data.replace(old, new))
    left = [str(p) for p in prefix.rglob("*") if p.is_file() and not p.is_symlink() and old in p.read_bytes()]
    assert not left, f"files of the copy still name {built_at}: {left}"
    return prefix


def create_named(name: str, wheels: Path, uv_cache: Path, envs_dir: Path, logs: Path) -> Path:
    """``create --name NAME`` by the real command line (in this process), pip mode from the local
    wheel directory, offline and unchecked: the env in ``envs_dir``. Nothing else is left beside it."""
    env = {**os.environ, "TFGPU_CACHE_DIR": str(uv_cache), "TFGPU_LOG_DIR": str(logs), "TFGPU_ENVS_DIR": str(envs_dir)}
    done = run_tool(
        "create", "--tf", "2.21", "--mode", "pip", "--python", "3.11", "--name", name,
        "--find-links", str(wheels), "--offline", "--no-verify", env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert os.listdir(envs_dir) == [name], os.listdir(envs_dir)
    return envs_dir / name
