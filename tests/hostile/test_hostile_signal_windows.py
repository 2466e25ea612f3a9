"""A signal to the tool's pid in the narrow windows of a create where it once slipped through: just
after a child (uv) was started, before the tool watched it; and between making the staging directory
and writing the record that proves it the tool's. And what SIGKILL in that second window leaves.

Before: a uv left running wrote on into the staging directory while the rollback deleted it (and its
record), so "nothing was left half-built" was false and every later create of the name refused with
``foreign-leftover``. Real signals (``os.kill`` of the tool's own pid) and real children; only the
moment is chosen, by making the signal the first thing the next step of the tool does."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from conftest import run_tool

from tfgpu.process import childwatch, interrupts
from tfgpu.process.runner import Runner

TARGET = ("--tf", "2.21", "--mode", "pip", "--python", "3.11")


@pytest.fixture
def tool_handlers():
    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    interrupts.install_signal_handlers()
    yield
    for signum, handler in saved.items():
        signal.signal(signum, handler)


def test_a_signal_just_after_a_child_starts_stops_the_child_before_it_propagates(tmp_path, monkeypatch, tool_handlers):
    late = tmp_path / "written-after-the-rollback"
    child = f"import time; time.sleep(1.0); open({str(late)!r}, 'w').write('x'); time.sleep(30)"
    started = childwatch.Floor.start

    def signal_first(*args, **kwargs):  # the first thing done once the child runs
        os.kill(os.getpid(), signal.SIGTERM)
        return started(*args, **kwargs)

    monkeypatch.setattr(childwatch.Floor, "start", signal_first)
    with pytest.raises(interrupts.Interrupted):
        Runner(None).run([sys.executable, "-c", child], quiet=True)
    time.sleep(2.0)  # longer than the child waits before it writes: a child still running would have
    assert not late.exists()


_STOP_BEFORE_THE_RECORD = textwrap.dedent(
    """
    import os, signal
    from tfgpu.envs import txn
    _write = txn.write_record
    def write_record(path, value):
        if path.parent.name.endswith(".tfgpu-staging") and not os.environ.get("TFGPU_TEST_SENT"):
            os.environ["TFGPU_TEST_SENT"] = "1"
            os.kill(os.getpid(), signal.{signame})
        return _write(path, value)
    txn.write_record = write_record
    """
)


# SIGTERM and SIGHUP raise the one exception through the one handler (tfgpu.process.interrupts), SIGINT
# another. Each window's test keeps one of the two in the fast tier and runs the other in the full one,
# crosswise, so both signals reach the tool's handler in the fast tier: here SIGTERM holds the branch
# (and SIGINT the other); test_a_signal_as_the_env_lands_in_place_keeps_it_and_says_so keeps SIGHUP.
@pytest.mark.parametrize("signame", ["SIGTERM", pytest.param("SIGHUP", marks=pytest.mark.slow), "SIGINT"])
def test_a_signal_between_the_staging_directory_and_its_record_rolls_back(tmp_path, tool_env, local_wheels, signame):
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(_STOP_BEFORE_THE_RECORD.format(signame=signame))
    env = {**tool_env, "PYTHONPATH": os.pathsep.join([str(hook), *filter(None, [os.environ.get("PYTHONPATH")])])}
    argv = ["create", *TARGET, "--name", "cut", "--find-links", str(local_wheels), "--offline", "--no-verify"]
    stopped = subprocess.run(
        [sys.executable, "-m", "tfgpu", *argv], env=env, capture_output=True, text=True, timeout=300
    )
    signum = getattr(signal, signame)
    assert stopped.returncode == 128 + signum, stopped.stderr
    assert "nothing was left half-built" in stopped.stderr
    envs = Path(tool_env["TFGPU_ENVS_DIR"])
    assert not (envs / ".cut.tfgpu-staging").exists(), stopped.stderr
    assert run_tool(*argv, env=tool_env).returncode == 0


def test_an_empty_staging_directory_a_killed_create_left_does_not_block_the_name(tmp_path, tool_env, local_wheels):
    envs = Path(tool_env["TFGPU_ENVS_DIR"])
    envs.mkdir(parents=True, exist_ok=True)
    (envs / ".cut.tfgpu-staging").mkdir()  # SIGKILL after mkdir, before the record: nothing in it
    argv = ["create", *TARGET, "--name", "cut", "--find-links", str(local_wheels), "--offline", "--no-verify"]
    done = run_tool(*argv, env=tool_env)
    assert done.returncode == 0, done.stderr
    assert (envs / "cut" / "tfgpu-env.json").is_file() and not (envs / ".cut.tfgpu-staging").exists()


def test_a_staging_directory_with_something_in_it_and_no_record_is_still_left_alone(tmp_path, tool_env, local_wheels):
    envs = Path(tool_env["TFGPU_ENVS_DIR"])
    staging = envs / ".cut.tfgpu-staging"
    staging.mkdir(parents=True)
    (staging / "someones-file").write_text("keep\n")
    argv = ["create", *TARGET, "--name", "cut", "--find-links", str(local_wheels), "--offline", "--no-verify"]
    refused = run_tool(*argv, env=tool_env)
    assert refused.returncode == 3 and "foreign-leftover" in refused.stderr
    assert (staging / "someones-file").read_text() == "keep\n"


_STOP_AS_THE_ENV_LANDS = textwrap.dedent(
    """
    import os, signal
    from tfgpu.envs import txn
    _commit = txn.commit
    def commit(location):
        _commit(location)
        os.kill(os.getpid(), signal.{signame})  # as one held over the move is delivered when it ends
    txn.commit = commit
    """
)


# SIGHUP holds the SIGTERM/SIGHUP branch here in the fast tier, SIGTERM runs in the full one (see above).
@pytest.mark.parametrize("signame", [pytest.param("SIGTERM", marks=pytest.mark.slow), "SIGHUP", "SIGINT"])
def test_a_signal_as_the_env_lands_in_place_keeps_it_and_says_so(tmp_path, tool_env, local_wheels, signame):
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(_STOP_AS_THE_ENV_LANDS.format(signame=signame))
    env = {**tool_env, "PYTHONPATH": os.pathsep.join([str(hook), *filter(None, [os.environ.get("PYTHONPATH")])])}
    argv = ["create", *TARGET, "--name", "landed", "--find-links", str(local_wheels), "--offline", "--no-verify"]
    stopped = subprocess.run(
        [sys.executable, "-m", "tfgpu", *argv], env=env, capture_output=True, text=True, timeout=300
    )
    prefix = Path(tool_env["TFGPU_ENVS_DIR"]) / "landed"
    assert stopped.returncode == 128 + getattr(signal, signame), stopped.stderr
    assert "nothing was left half-built" not in stopped.stderr
    assert f"the env at {prefix} is complete" in stopped.stderr and "it was not checked" in stopped.stderr
    assert f"tfgpu-install verify --prefix {prefix}" in stopped.stderr
    assert (prefix / "tfgpu-env.json").is_file()
    listed = run_tool("list", env=tool_env)
    assert "landed" in listed.stdout and "ok" in listed.stdout, listed.stdout
