"""Real conda locks, made by the real tool once a session and copied to each test that reads,
checks, installs or edits one.

A lock of one target from one channel and index is the same file each time it is made (its header
names the file by its base name, kept the same here): making it
again for each test cost a rattler solve and a uv resolution each (about half a second of CPU).
The copy is the test's own (it may edit it); tests about the making itself (what ``lock`` says,
its refusals, its options) still run ``lock``.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

PY = f"{sys.version_info.major}.{sys.version_info.minor}"

_MADE: dict[tuple, Path] = {}


def conda_lock(
    factory,
    target: Path,
    channel: Path | str,
    index: str,
    *extra: str,
    tf: str = "2.13",
    platforms: tuple[str, ...] = ("linux-64",),
    python: str = PY,
    env: dict[str, str] | None = None,
) -> Path:
    """``lock --mode conda`` of ``tf`` from ``channel`` (its PyPI part from ``index``), written to
    ``target``: made the first time in this session (``factory``: pytest's tmp_path_factory), a
    copy of that lock after. ``env``: more of the environment the tool runs in."""
    from conftest import run_tool

    key = (target.name, str(channel), index, tf, platforms, python, extra, tuple(sorted((env or {}).items())))
    if key not in _MADE:
        where = factory.mktemp("made-lock")
        made = where / target.name
        argv = ["lock", "--tf", tf, "--mode", "conda", "--python", python, "--no-detect", "--channel", str(channel)]
        for platform in platforms:
            argv += ["--platform", platform]
        done = run_tool(
            *argv,
            *extra,
            "-o",
            str(made),
            env={
                **os.environ,
                "TFGPU_INDEX_URL": index,
                "TFGPU_CACHE_DIR": str(where / "cache"),
                "TFGPU_LOG_DIR": str(where / "logs"),
                "HOME": str(where),
                **(env or {}),
            },
        )
        assert done.returncode == 0, done.stdout + done.stderr
        _MADE[key] = made
    shutil.copyfile(_MADE[key], target)
    return target
