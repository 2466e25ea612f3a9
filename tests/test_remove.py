"""``remove``: what it deletes, said as it goes; an interrupted remove says what is left and where,
and ``list`` shows it with the command that frees it; an env a ``run`` holds is not removed.

A real env built from the local wheel directory once, each test deleting a copy of it put back where
it was built (tests/builtenvs.py); the real command line (in a process of its own where a signal or a
second command must reach it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import builtenvs
import pytest
from conftest import run_process, run_tool

TARGET = ("--tf", "2.21", "--mode", "pip", "--python", "3.11")
FILLER = 3000


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
    """An env built with --name by the real command line, with some thousands of extra files (a real
    env has tens of thousands), kept aside once (tests/builtenvs.py): each test deletes a copy."""
    builtenvs.clear(envs_dir)  # what a test before the first that asks for it left there
    prefix = builtenvs.create_named("doomed", local_wheels, uv_cache, envs_dir, tmp_path_factory.mktemp("logs"))
    site = next(prefix.glob("lib/python3*/site-packages"))
    one = site / "filler" / "one.py"
    one.parent.mkdir()
    one.write_text("x = 1\n" * 20)
    for index in range(
        FILLER
    ):  # links to one file, as uv links an env's files to its cache: a file each to count and delete
        folder = site / "filler" / f"d{index // 100}"
        folder.mkdir(exist_ok=True)
        os.link(one, folder / f"f{index}.py")
    return builtenvs.keep(prefix, tmp_path_factory.mktemp("kept") / "doomed")


@pytest.fixture
def named_env(kept_env, tool_env) -> Path:
    """The kept env back where it was built (hard links: these tests only delete its files)."""
    return builtenvs.restore(kept_env, Path(tool_env["TFGPU_ENVS_DIR"]) / "doomed", link=True)


def test_remove_says_the_files_and_bytes_it_deletes_and_json_stays_json(named_env, tool_env):
    done = run_process("remove", "--name", "doomed", "--json", env=tool_env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["removed"] == str(named_env)
    assert f"Remove {named_env}: " in done.stderr and " files, " in done.stderr
    last = [line for line in done.stderr.splitlines() if "deleting " in line][-1]
    assert "(100%)" in last, done.stderr
    assert not named_env.exists()


SIGTERM_MIDWAY = r"""
import os, signal, sys
from tfgpu.envs import writes
from tfgpu import cli

deleted, original = [], writes.remove_tree

def remove_tree(tree, owner=None):  # the signal arrives once a good part of the env is gone
    deleted.append(tree)
    if len(deleted) == 10:
        os.kill(os.getpid(), signal.SIGTERM)
    return original(tree, owner)

writes.remove_tree = remove_tree
sys.exit(cli.main(sys.argv[1:]))
"""


def test_an_interrupted_remove_says_what_is_left_and_list_shows_it_until_remove_finishes(named_env, tool_env):
    stopped = subprocess.run(
        [sys.executable, "-c", SIGTERM_MIDWAY, "remove", "--name", "doomed"],
        capture_output=True,
        text=True,
        env=tool_env,
        timeout=300,
    )
    removing = named_env.parent / ".doomed.tfgpu-removing"
    assert stopped.returncode == 143, stopped.stderr
    assert "nothing was left half-built" not in stopped.stderr
    assert f"{named_env} was partly removed: what is left of it is in {removing}" in stopped.stderr
    assert "`tfgpu-install remove --name doomed` finishes the removal" in stopped.stderr
    assert removing.is_dir() and not named_env.exists()

    listed = run_tool("list", env=tool_env)
    assert listed.returncode == 0, listed.stderr
    assert str(removing) in listed.stdout and "tfgpu-install remove --name doomed" in listed.stdout
    as_json = json.loads(run_tool("list", "--json", env=tool_env).stdout)
    [left] = as_json["leftovers"]
    assert left["path"] == str(removing) and left["command"] == "tfgpu-install remove --name doomed"
    assert left["files"] > 0 and left["bytes"] > 0

    finished = run_tool("remove", "--name", "doomed", env=tool_env)
    assert finished.returncode == 0, finished.stderr
    assert "deleting " in finished.stderr  # the rest is counted as it goes too
    assert not removing.exists()
    assert json.loads(run_tool("list", "--json", env=tool_env).stdout)["leftovers"] == []


def test_remove_refuses_an_env_a_run_is_using_and_names_its_pid(named_env, tool_env):
    running = subprocess.Popen(
        [sys.executable, "-m", "tfgpu", "run", "--name", "doomed", "--", "python", "-c", "import time; time.sleep(60)"],
        env=tool_env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        hold = named_env.parent / ".doomed.tfgpu-inuse"
        for _ in range(600):  # a hang guard: the hold is written before the program starts
            if hold.exists() and f"{running.pid} run" in hold.read_text():
                break
            time.sleep(0.05)
        refused = run_tool("remove", "--name", "doomed", env=tool_env)
        assert refused.returncode == 1, refused.stderr
        assert "env-in-use" in refused.stderr and f"pid {running.pid}" in refused.stderr
        assert (named_env / "bin" / "python").exists()
    finally:
        running.terminate()
        running.wait(timeout=60)
    done = run_tool("remove", "--name", "doomed", env=tool_env)
    assert done.returncode == 0, done.stderr
    assert not named_env.exists() and not (named_env.parent / ".doomed.tfgpu-inuse").exists()
    assert os.listdir(named_env.parent) == []
