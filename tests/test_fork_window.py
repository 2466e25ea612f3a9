"""A signal that lands while the tool starts a child is handled once the child is supervised: the
child is stopped and reaped before the interrupt goes on (to a rollback that deletes what the child
writes into).

The signal is delivered deterministically inside the window, on both ways a child is started
(``tfgpu.process.spawning``): with ``vfork`` through setpriv, the tool sends it to itself the moment
``subprocess`` has the child and before it hands it over; with ``fork`` and the ``preexec_fn``
(where setpriv cannot be used), the child itself sends it between ``fork`` and ``exec``, while the
tool is still inside ``subprocess``. Real processes throughout; a test script in a process of its
own, so the signals reach a tool and not pytest.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

SCRIPT = r"""
import os, signal, subprocess, sys, time
from tfgpu.process import runner as proc, spawning
from tfgpu.process.interrupts import install_signal_handlers

install_signal_handlers()
way, method, signum, rounds, pids = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]

if way == "fork":
    spawning._found["wrapper"] = None  # no setpriv: the preexec_fn sets the death signal
    original = spawning._die_with_parent

    def inside_the_fork():  # in the child, before exec: the tool is still in Popen, its signals held
        with open(pids, "a") as out:
            out.write(f"{os.getpid()}\n")
        os.kill(os.getppid(), signum)
        original()

    spawning._die_with_parent = inside_the_fork
else:
    assert spawning._wrapper(), "no setpriv with --pdeathsig here"
    original_init = subprocess.Popen.__init__

    def init(self, *args, **options):  # the child started, not yet handed to the tool
        original_init(self, *args, **options)
        assert options["preexec_fn"] is None and args[0][0] == spawning._wrapper(), args
        with open(pids, "a") as out:
            out.write(f"{self.pid}\n")
        os.kill(os.getpid(), signum)

    subprocess.Popen.__init__ = init

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
@pytest.mark.parametrize("way", ["vfork", "fork"])
def test_a_signal_during_the_fork_stops_and_reaps_the_child_first(tmp_path, way, method, signum):
    rounds = 25
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, way, method, str(signum), str(rounds), str(tmp_path / "pids")],
        capture_output=True,
        text=True,
        timeout=120,  # a hang guard: each round takes milliseconds
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"stopped {rounds} of {rounds}" in done.stdout, done.stdout + done.stderr


CREATE = r"""
import os, signal, subprocess, sys
from tfgpu.process import spawning as proc

proc._found["wrapper"] = None  # the fork, so that the child can send the signal before its exec
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
