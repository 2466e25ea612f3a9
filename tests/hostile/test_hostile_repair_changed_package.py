"""A repair allowed to change a package the env holds (``--allow-changes``: cuDNN 9.1 to 9.28),
SIGKILLed while uv is taking the old version's files out: the old ``.dist-info`` still names 9.1 but
most of its files are gone. ``repair --undo`` puts the old version back whole, byte for byte, not
only the files the repair itself wrote.

Everything is real (tests/test_repair_interrupts.py: real uv, real wheels, real SIGKILL, uv frozen
at the moment seen); uv gets a cache directory under tmp, never the user's.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest
import repairhelpers as rh
import test_repair_interrupts as tri
from test_repair_interrupts import FAT, FILES, fat_wheels, site, tool, tool_env, tree  # noqa: F401 (fixtures)

pytestmark = pytest.mark.slow

CUDNN_DIR = FAT["nvidia-cudnn-cu12"]


@pytest.fixture
def old_cudnn_env(tmp_path, fat_wheels, tool_env) -> Path:  # noqa: F811
    return rh.user_venv(
        tmp_path / "env", fat_wheels, "tensorflow==2.21.0", f"nvidia-cudnn-cu12=={rh.OLD_CUDNN}", env=tool_env
    )


def _old_half_gone(packages: Path) -> bool:
    """uv has taken out part of the old cuDNN's files; its ``.dist-info`` still names the old version."""
    where = packages / CUDNN_DIR
    try:
        return len(os.listdir(where)) < FILES // 2 and any(packages.glob(f"nvidia_cudnn_cu12-{rh.OLD_CUDNN}.dist-info"))
    except OSError:
        return False


def test_undo_after_a_sigkill_while_uv_takes_out_the_old_version_puts_it_back_whole(
    old_cudnn_env,
    fat_wheels,  # noqa: F811
    tool_env,  # noqa: F811
    monkeypatch,
):
    before = tree(old_cudnn_env)
    monkeypatch.setattr(tri, "QUIET", (*tri.QUIET, "--allow-changes"))
    tri.interrupt_when(old_cudnn_env, fat_wheels, tool_env, _old_half_gone, signal.SIGKILL)
    assert json.loads((old_cudnn_env / "etc" / "tfgpu" / "repair.json").read_text())["state"] == "applying"
    # the old version comes from where the user got it (the local wheel directory), never an index
    undone = tool(
        tool_env,
        "repair",
        "--undo",
        "--prefix",
        str(old_cudnn_env),
        "--find-links",
        str(fat_wheels),
        "--offline",
        "--json",
    )
    assert undone.returncode == 0, undone.stdout + undone.stderr[-3000:]
    after = tree(old_cudnn_env)
    lost = sorted(set(before) - set(after))
    assert lost == [], f"{len(lost)} paths of the env before the repair are gone, first {lost[:3]}"
    assert after == before
    assert "gone now" not in undone.stderr
