"""SIGINT and SIGTERM sent to the tool's pid alone stop a create on a real terminal and piped, at
uv's install and at the GPU check: exit 130/143, a message that says what is left, nothing half-built,
and nothing left half-written in the user's uv cache.

Real components: the command line on a real pseudo-terminal (tests/terminal.py), real uv, a real
loopback index that serves its wheels slowly (tests/localindex.py), so the install is still running
when the signal comes. The GPU check runs a stand-in TensorFlow that takes its time to import (no GPU
here: the driver boundary)."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import localindex
import pytest
import terminal
import wheelhouse

pytestmark = pytest.mark.slow  # a real slow server and real signals: seconds per case


@pytest.fixture(scope="module")
def slow_index(tmp_path_factory):
    """An index whose TensorFlow wheel takes seconds to arrive and seconds to import."""
    if not wheelhouse.have_compiler():
        pytest.skip("gcc is needed to build the test shared libraries")
    wheels = wheelhouse.tensorflow_wheelhouse(tmp_path_factory.mktemp("wheels"))
    for old in wheels.glob("tensorflow-*.whl"):
        old.unlink()
    requires = [f"{dist}>={ver}; extra == 'and-cuda'" for dist, ver, _ in wheelhouse.CUDA_WHEELS]
    requires.append(f"{wheelhouse.NVCC[0]}>=12.5.82; extra == 'and-cuda'")
    files = {
        "tensorflow/__init__.py": b"import time\ntime.sleep(60)\n__version__ = '2.21.0'\n",
        "tensorflow/weights.bin": os.urandom(2 << 20),  # 128 pieces of the dripping server: seconds
    }
    wheelhouse.wheel(wheels, "tensorflow", "2.21.0", files, requires, extras=["and-cuda"])
    root = localindex.build_index(wheels, tmp_path_factory.mktemp("index"))
    with localindex.Server(root, drip=0.05) as url:
        yield url


def _create(tmp_path: Path, tool_env: dict, index: str):
    user_cache = tmp_path / "user-uv-cache"
    user_cache.mkdir()
    # Someone else's half-written entry (another uv at work): it is not this run's to remove.
    (user_cache / ".tmpSomeoneElse").mkdir()
    env = {
        **tool_env,
        "UV_DEFAULT_INDEX": index,
        "TFGPU_UV_CACHE": "user",
        "UV_CACHE_DIR": str(user_cache),
        "TFGPU_CACHE_DIR": str(tmp_path / "tool-cache"),
    }
    argv = ["create", "--tf", "2.21", "--mode", "pip", "--python", "3.11", "--prefix", str(tmp_path / "env")]
    return argv, env, user_cache


def _temporaries(*caches: Path) -> list[str]:
    found = subprocess.run(["find", *map(str, caches), "-name", ".tmp*"], capture_output=True, text=True)
    return sorted(line for line in found.stdout.splitlines() if not line.endswith(".tmpSomeoneElse"))


def _leftovers(tmp_path: Path) -> list[str]:
    return [p.name for p in tmp_path.iterdir() if "tfgpu-staging" in p.name or "tfgpu-old" in p.name]


@pytest.mark.parametrize(
    "signum,ignored,piped",
    [
        (signal.SIGINT, False, False),
        (signal.SIGTERM, False, False),
        (signal.SIGINT, True, False),  # handed over ignored, as a shell's background job gets it
        (signal.SIGINT, False, True),
    ],
    ids=["sigint-terminal", "sigterm-terminal", "sigint-inherited-ignored", "sigint-piped"],
)
def test_a_signal_to_the_pid_during_uvs_install_stops_the_create(
    tmp_path, tool_env, slow_index, signum, ignored, piped
):
    argv, env, user_cache = _create(tmp_path, tool_env, slow_index)
    ended = terminal.run_and_signal(
        argv, env, "Install TensorFlow", signum, delay=1.0, ignore_sigint=ignored, piped=piped
    )
    assert ended.signalled, ended.screen[-3000:]
    assert ended.returncode == 128 + signum, ended.screen[-3000:]
    assert "nothing was left half-built" in ended.screen
    assert not (tmp_path / "env").exists()
    assert _leftovers(tmp_path) == []
    assert _temporaries(user_cache, tmp_path / "tool-cache") == [], ended.screen[-2000:]
    assert (user_cache / ".tmpSomeoneElse").is_dir()


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["sigint", "sigterm"])
def test_a_signal_to_the_pid_during_the_gpu_check_says_the_env_is_complete_and_unchecked(
    tmp_path, tool_env, slow_index, signum
):
    argv, env, user_cache = _create(tmp_path, tool_env, slow_index)
    ended = terminal.run_and_signal(argv, env, "Checking the GPU", signum, delay=1.0)
    assert ended.signalled, ended.screen[-3000:]
    assert ended.returncode == 128 + signum, ended.screen[-3000:]
    prefix = tmp_path / "env"
    assert "nothing was left half-built" not in ended.screen
    assert f"the env at {prefix} is complete" in ended.screen
    assert f"tfgpu-install verify --prefix {prefix}" in ended.screen
    assert (prefix / "tfgpu-env.json").exists()
    assert _leftovers(tmp_path) == []
    assert _temporaries(user_cache, tmp_path / "tool-cache") == []


@pytest.mark.parametrize(
    "marker", ["Create the venv", "Resolve the exact", "Keep the bytecode", "Set up the CUDA", "Move the finished"]
)
def test_sigint_to_the_pid_at_every_step_stops_and_says_what_is_left(tmp_path, tool_env, slow_index, marker):
    argv, env, user_cache = _create(tmp_path, tool_env, slow_index)
    ended = terminal.run_and_signal(argv, env, marker, signal.SIGINT, delay=0.0)
    assert ended.signalled and ended.returncode == 130, ended.screen[-3000:]
    prefix = tmp_path / "env"
    if prefix.exists():  # the signal came once the env was in place: it is complete, and said so
        assert f"the env at {prefix} is complete" in ended.screen and (prefix / "tfgpu-env.json").exists()
    else:
        assert "nothing was left half-built" in ended.screen, ended.screen[-3000:]
    assert _leftovers(tmp_path) == []
    assert _temporaries(user_cache, tmp_path / "tool-cache") == []
