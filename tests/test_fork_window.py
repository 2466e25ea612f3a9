"""A signal that lands while the tool forks a child is handled once the child is supervised: the
child is stopped and reaped before the interrupt goes on (to a rollback that deletes what the child
writes into).

The signal is delivered deterministically inside the fork window: the child itself, between ``fork``
and ``exec`` (the hook ``tfgpu.process.runner`` runs there), sends it to the tool, whose signals are held
across the fork, so it arrives at the very moment the held signals are let in. Real processes
throughout; a test script in a process of its own, so the signals reach a tool and not pytest.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

SCRIPT = r"""
import os, signal, sys, time
from tfgpu.process import runner as proc
from tfgpu.process.interrupts import install_signal_handlers

install_signal_handlers()
method, signum, rounds, pids = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
original = proc._die_with_parent

def inside_the_fork():  # in the child, before exec: the tool is still in Popen, its signals held
    with open(pids, "a") as out:
        out.write(f"{os.getpid()}\n")
    os.kill(os.getppid(), signum)
    original()

proc._die_with_parent = inside_the_fork
runner = proc.Runner(None)
argv = ["sleep", "30"]
start = {
    "run": lambda: runner.run(argv),
    "run-on-a-terminal": lambda: runner.run(argv, screen=lambda text: None),
    "capture": lambda: runner.capture(argv),
    "start": lambda: runner.start(argv),
    "attached": lambda: runner.attached(argv, env=dict(os.environ)),
}[method]
stopped = 0
for _ in range(rounds):
    try:
        start()
    except KeyboardInterrupt:
        stopped += 1
    child = int(open(pids).read().split()[-1])
    try:
        os.kill(child, 0)
    except ProcessLookupError:
        continue
    print(f"child {child} still there after the interrupt", flush=True)
    sys.exit(1)
print(f"stopped {stopped} of {rounds}")
"""


@pytest.mark.parametrize("method", ["run", "run-on-a-terminal", "capture", "start", "attached"])
@pytest.mark.parametrize("signum", [15, 2], ids=["sigterm", "sigint"])
def test_a_signal_during_the_fork_stops_and_reaps_the_child_first(tmp_path, method, signum):
    rounds = 25
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, method, str(signum), str(rounds), str(tmp_path / "pids")],
        capture_output=True,
        text=True,
        timeout=120,  # a hang guard: each round takes milliseconds
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"stopped {rounds} of {rounds}" in done.stdout, done.stdout + done.stderr


CREATE = r"""
import os, signal, subprocess, sys
from tfgpu.process import runner as proc

forking = []
original_init, original_hook = subprocess.Popen.__init__, proc._die_with_parent

def init(self, args, *rest, **options):
    forking[:] = [str(a) for a in args]
    original_init(self, args, *rest, **options)

def inside_the_fork():
    if os.path.basename(forking[0]) == "uv" and forking[1] == "venv":
        os.kill(os.getppid(), signal.SIGTERM)
    original_hook()

subprocess.Popen.__init__, proc._die_with_parent = init, inside_the_fork
from tfgpu import cli
sys.exit(cli.main(sys.argv[1:]))
"""


@pytest.mark.slow  # two creates from a local wheel directory
def test_a_sigterm_during_the_fork_of_uv_venv_leaves_a_target_the_next_create_builds(tmp_path, tool_env, local_wheels):
    import time

    from conftest import run_process

    prefix = tmp_path / "env"
    argv = ["create", "--tf", "2.21", "--mode", "pip", "--python", "3.11", "--prefix", str(prefix)]
    argv += ["--find-links", str(local_wheels), "--offline", "--no-verify"]
    first = subprocess.run(
        [sys.executable, "-c", CREATE, *argv], capture_output=True, text=True, env=tool_env, timeout=300
    )
    assert first.returncode == 143, first.stderr
    assert "nothing was left half-built" in first.stderr
    time.sleep(1.0)  # a uv venv left running would have written by now
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "logs") == [], first.stderr
    again = run_process(*argv, env=tool_env, timeout=600)
    assert again.returncode == 0, again.stderr
    assert (prefix / "tfgpu-env.json").exists()
