"""Offline pip bundles: a hashed pip lock (``tfgpu.lock.pip``), every wheel it names, and what
every bundle carries (``steps.py``). Layout: ``steps.py``'s docstring."""

from __future__ import annotations

import json
from pathlib import Path

from tfgpu import __version__
from tfgpu.doors import trees
from tfgpu.doors.paths import write_output
from tfgpu.lock.bundle.files import digest
from tfgpu.lock.bundle.steps import (
    FORMAT,
    MANIFEST,
    PARTIAL,
    Built,
    add_tool_and_installer,
    collect,
    start,
    wheels_from_pylock,
)
from tfgpu.lock.pip import lockfile
from tfgpu.lock.platforms import Platform
from tfgpu.lock.resolving import compile_pins, index_url

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing: type checkers treat it alike
if TYPE_CHECKING:
    from typing import Any


def build(resolution, platform: Platform, out: Path, *, reporter=None) -> Built:
    """Write the bundle for ``resolution`` on ``platform`` into ``out``; returns its summary."""
    index_url()  # TFGPU_INDEX_URL through the URL door before the bundle directory is made
    runner, uv, cache, say = start(resolution, platform, out, reporter)
    out = out.absolute()
    say(f"resolving TF {resolution.tensorflow} for {platform.name}, Python {resolution.python} (wheels only)")
    body, pylock = compile_pins(
        list(resolution.packages.pip),
        platform,
        resolution.python,
        runner=runner,
        uv=uv,
        cache_dir=cache,
        only_binary=True,
    )
    lock_name = f"tfgpu-lock.{platform.name}.txt"
    header = lockfile.make_header(resolution, platform, cpu_only=False)
    write_output(out / lock_name, lockfile.render(header.to_dict(), body, lock_name))
    write_output(out / f"pylock.{platform.name}.toml", pylock)
    wheels = wheels_from_pylock(pylock, platform, resolution.python)
    say(f"collecting {len(wheels)} wheels into {out / 'wheels'}")
    collect(wheels, out / "wheels", reporter)
    tool_files = add_tool_and_installer(
        out, resolution, platform, readme(header, lock_name, len(wheels)), say, reporter
    )
    files: dict[str, dict[str, Any]] = {
        f"wheels/{w.filename}": {"sha256": w.sha256, "size": (out / "wheels" / w.filename).stat().st_size}
        for w in wheels
    }
    for name in [
        lock_name,
        f"pylock.{platform.name}.toml",
        "README.md",
        "install.sh",
        *(f"tool/{n}" for n in tool_files),
    ]:
        files[name] = {"sha256": digest(out / name), "size": (out / name).stat().st_size}
    manifest = {
        "format": FORMAT,
        "mode": "pip",
        "tool": "tfgpu-install",
        "tool_version": __version__,
        "platform": platform.name,
        "python": resolution.python,
        "tensorflow": resolution.tensorflow,
        "lock": lock_name,
        "lock_sha256": lockfile.read(out / lock_name).sha256,
        "files": files,
    }
    write_output(out / MANIFEST, json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    trees.unlink(out / PARTIAL)
    total = sum(item["size"] for item in files.values()) + (out / MANIFEST).stat().st_size
    built = Built(
        str(out),
        "pip",
        platform.name,
        resolution.tensorflow,
        resolution.python,
        len(files) + 1,
        len(wheels),
        len(tool_files),
        total,
    )
    say(f"bundle {out}: {built.files} files, {built.mb} MB")
    return built


def readme(header: lockfile.PipHeader, lock_name: str, wheels: int) -> str:
    """A pip bundle's README.md."""
    r = header.resolution
    return f"""# Offline TensorFlow bundle (tfgpu-install {__version__})

TensorFlow {r.tensorflow} with CUDA {r.cuda} and cuDNN {r.cudnn} (pip wheels) for {header.platform},
Python {r.python}. The target needs an NVIDIA driver >= {r.min_driver}, Python {r.python}
and no network (`install.sh` uses the bundle's own uv, so Python's `venv`/`ensurepip` are not needed).

## Install

    ./install.sh /path/to/env            # makes a venv for tfgpu-install from tool/, then:
    tfgpu-install create --from-bundle . --prefix /path/to/env

`install.sh` takes Python from `TFGPU_PYTHON`, else `python{r.python}`, else `python3`, running
each one first (a broken shim is passed over, a wrong version named, one that does not answer in
`TFGPU_PYTHON_TIMEOUT` seconds, default 60, given up on); it keeps
tfgpu-install in `~/.local/share/tfgpu-install/tool-{__version__}-py{r.python}` (`TFGPU_TOOL_ENV` overrides).
Extra arguments go to `create` (for example `--no-verify`, `--force`, `--jupyter`).

Every file is checked against `bundle.json` before anything is installed; a missing or damaged
file stops the install (exit 3) with nothing changed. Then `{lock_name}` is installed exactly, with
every wheel checked against its sha256, and the environment is set up and verified as
`tfgpu-install create` does.

## Contents

- `{lock_name}`: the lock (`pip install --require-hashes -r {lock_name}` also accepts it);
  `pylock.{header.platform}.toml` is the same resolution in PEP 751 form.
- `wheels/`: the {wheels} wheels the lock names.
- `tool/`: tfgpu-install and its dependencies.
- `bundle.json`: every file's sha256 and size.

Regenerate: `{lockfile.regenerate_command(header, "DIR").replace(" lock ", " bundle ").replace(" --no-detect", "")}`
"""
