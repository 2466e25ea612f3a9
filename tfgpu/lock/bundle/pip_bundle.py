"""Offline pip bundles: a hashed pip lock (``tfgpu.lock.pip``), every wheel it names, and what
every bundle carries (``steps.py``). Layout: ``steps.py``'s docstring."""

from __future__ import annotations

import json
from pathlib import Path

from tfgpu import __version__
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
from tfgpu.lock.bundle.files import digest, readme
from tfgpu.lock.pip import lockfile
from tfgpu.lock.platforms import Platform
from tfgpu.lock.resolving import compile_pins, index_url
from tfgpu.paths import write_output


def build(resolution, platform: Platform, out: Path, *, reporter=None) -> Built:
    """Write the bundle for ``resolution`` on ``platform`` into ``out``; returns its summary."""
    index_url()  # TFGPU_INDEX_URL through the URL door before the bundle directory is made
    runner, uv, cache, say = start(resolution, platform, out, reporter)
    out = out.absolute()
    say(f"resolving TF {resolution.tensorflow} for {platform.name}, Python {resolution.python} (wheels only)")
    body, pylock = compile_pins(list(resolution.packages.pip), platform, resolution.python, runner=runner, uv=uv,
                                cache_dir=cache, only_binary=True)
    lock_name = f"tfgpu-lock.{platform.name}.txt"
    meta = lockfile.make_meta(resolution, platform, cpu_only=False)
    write_output(out / lock_name, lockfile.render(meta, body, lock_name))
    write_output(out / f"pylock.{platform.name}.toml", pylock)
    wheels = wheels_from_pylock(pylock, platform, resolution.python)
    say(f"collecting {len(wheels)} wheels into {out / 'wheels'}")
    collect(wheels, out / "wheels", reporter)
    tool_files = add_tool_and_installer(out, resolution, platform, readme(meta, lock_name, len(wheels)), say,
                                        reporter)
    files = {f"wheels/{w.filename}": {"sha256": w.sha256, "size": (out / "wheels" / w.filename).stat().st_size}
             for w in wheels}
    for name in [lock_name, f"pylock.{platform.name}.toml", "README.md", "install.sh",
                 *(f"tool/{n}" for n in tool_files)]:
        files[name] = {"sha256": digest(out / name), "size": (out / name).stat().st_size}
    manifest = {"format": FORMAT, "mode": "pip", "tool": "tfgpu-install", "tool_version": __version__,
                "platform": platform.name, "python": resolution.python, "tensorflow": resolution.tensorflow,
                "lock": lock_name, "lock_sha256": lockfile.read(out / lock_name).meta["sha256"], "files": files}
    write_output(out / MANIFEST, json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    (out / PARTIAL).unlink(missing_ok=True)
    total = sum(item["size"] for item in files.values()) + (out / MANIFEST).stat().st_size
    built = Built(str(out), "pip", platform.name, resolution.tensorflow, resolution.python, len(files) + 1,
                  len(wheels), len(tool_files), total)
    say(f"bundle {out}: {built.files} files, {built.mb} MB")
    return built
