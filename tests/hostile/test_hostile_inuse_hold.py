"""The file ``run`` and ``shell`` hold beside an env (``.T.tfgpu-inuse``) found as something the tool
never writes there — a symlink (dangling or to a file), a directory, a FIFO — planted by someone or
left by another program. The hold cannot be taken on it, so nothing can tell whether the env is in
use: ``run`` must not start unheld and ``remove`` must not delete an env a program may be using. Both
refuse, name the entry and the way forward, and leave the env and the entry's target as they were.

Real components: a real env built from the local wheel directory (once; each test gets a copy put
back where it was built, tests/builtenvs.py), the real command line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import builtenvs
import pytest
from conftest import run_tool
from hangguard import hang_guard


@pytest.fixture(scope="module")
def envs_dir(tmp_path_factory) -> Path:
    """The envs directory of this module's tests: the kept env was built there, so a copy put back
    there is the env a build there leaves, byte for byte (its marker names the path)."""
    return tmp_path_factory.mktemp("envs")


@pytest.fixture
def tool_env(tool_env, envs_dir) -> dict[str, str]:
    """conftest's ``tool_env`` with this module's envs directory, emptied of what the test before left."""
    builtenvs.clear(envs_dir)
    return {**tool_env, "TFGPU_ENVS_DIR": str(envs_dir)}


@pytest.fixture(scope="module")
def kept_env(local_wheels, uv_cache, envs_dir, tmp_path_factory) -> Path:
    """A real env built once by ``create --name held`` and kept aside (tests/builtenvs.py)."""
    builtenvs.clear(envs_dir)  # what a test before the first that asks for it left there
    built = builtenvs.create_named("held", local_wheels, uv_cache, envs_dir, tmp_path_factory.mktemp("logs"))
    return builtenvs.keep(built, tmp_path_factory.mktemp("kept") / "held")


@pytest.fixture
def held_env(kept_env, tool_env) -> Path:
    """The kept env back where it was built (hard links: these tests write into none of its files)."""
    return builtenvs.restore(kept_env, Path(tool_env["TFGPU_ENVS_DIR"]) / "held", link=True)


def _plant(kind: str, hold: Path, tmp_path: Path) -> Path:
    victim = tmp_path / "victim.txt"
    victim.write_text("not the tool's\n")
    if kind == "symlink":
        hold.symlink_to(victim)
    elif kind == "dangling-symlink":
        hold.symlink_to(tmp_path / "nowhere")
    elif kind == "directory":
        hold.mkdir()
        (hold / "inside").write_text("someone's\n")
    elif kind == "fifo":
        os.mkfifo(hold)
    return victim


@pytest.mark.parametrize("kind", ["symlink", "dangling-symlink", "directory", "fifo"])
def test_a_foreign_entry_at_the_hold_stops_run_and_remove(held_env, tool_env, tmp_path, kind):
    hold = held_env.parent / ".held.tfgpu-inuse"
    victim = _plant(kind, hold, tmp_path)
    with hang_guard(f"run with a {kind} at the hold"):  # refused before any program starts: in this process
        ran = run_tool("run", "--name", "held", "--", "true", env=tool_env)
    assert ran.returncode == 1, ran.stderr
    assert "hold-not-a-file" in ran.stderr and str(hold) in ran.stderr and "Traceback" not in ran.stderr
    refused = run_tool("remove", "--name", "held", env=tool_env)
    assert refused.returncode == 1, refused.stderr
    assert "hold-not-a-file" in refused.stderr and "nothing was removed" in refused.stderr
    assert (held_env / "tfgpu-env.json").is_file()
    assert os.path.lexists(hold) and victim.read_text() == "not the tool's\n"
    if kind == "directory":
        assert (hold / "inside").read_text() == "someone's\n"
    # Taken away as the message says, both work again.
    if kind == "directory":
        (hold / "inside").unlink()
        hold.rmdir()
    else:
        hold.unlink()
    assert run_tool("run", "--name", "held", "--", "true", env=tool_env).returncode == 0
    assert run_tool("remove", "--name", "held", env=tool_env).returncode == 0
    assert not held_env.exists()


def test_remove_names_only_the_tool_processes_that_hold_the_env(held_env, tool_env):
    """Pids written into the hold file by someone else (pid 1, an unrelated program, a hundred KiB of
    them before the real holder's line) are not named: the message tells the user to stop them."""
    import time

    bystander = subprocess.Popen(["sleep", "120"])
    hold = held_env.parent / ".held.tfgpu-inuse"
    hold.write_text(f"1 run\n{bystander.pid} shell\n" * 8000)  # more than the 64 KiB read
    running = subprocess.Popen(
        [sys.executable, "-m", "tfgpu", "run", "--name", "held", "--", "python", "-c", "import time; time.sleep(60)"],
        env=tool_env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        for _ in range(600):  # a hang guard: the hold is written before the program starts
            if f"{running.pid} run" in hold.read_text():
                break
            time.sleep(0.05)
        refused = run_tool("remove", "--name", "held", env=tool_env)
        assert refused.returncode == 1 and "env-in-use" in refused.stderr, refused.stderr
        assert f"`tfgpu-install run` (pid {running.pid})" in refused.stderr
        assert "(pid 1)" not in refused.stderr and f"pid {bystander.pid}" not in refused.stderr, refused.stderr
        assert (held_env / "tfgpu-env.json").is_file()
    finally:
        running.kill()
        running.wait()
        bystander.kill()
        bystander.wait()
