"""How a child is started (``tfgpu.process.spawning``): through setpriv with ``vfork`` where setpriv
can set the death signal, else with ``fork`` and a ``preexec_fn``; either way the child dies with
the tool, gets no blocked signal, and a program that cannot start is reported as ``subprocess``
reports it. Real processes throughout: the tool's runner, real setpriv, real programs.
"""

from __future__ import annotations

import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tfgpu.process import spawning
from tfgpu.process.runner import Runner
from tfgpu.process.signalmask import shielded

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux's death signal")

HAS_SETPRIV = spawning._wrapper() is not None


def _state(pid: int) -> str:
    """The process's state letter; "" once it is gone (a zombie, "Z", is dead but not reaped)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("State:"):
                return line.split()[1]
    except OSError:
        pass
    return ""


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]
    except OSError:
        return b""


TOOL = r"""
import sys, time
from tfgpu.process import runner, spawning
if sys.argv[1] == "fork":
    spawning._found["wrapper"] = None
child = runner.Runner(None).start(["sleep", "30"])
print(child.pid, flush=True)
time.sleep(60)
"""


def test_a_child_dies_with_the_tool_killed_by_sigkill(way):
    tool = subprocess.Popen([sys.executable, "-c", TOOL, way], stdout=subprocess.PIPE, text=True)
    try:
        child = int(tool.stdout.readline())
        # setpriv sets the death signal before it runs the program (a SIGKILL within that half
        # millisecond leaves the child, as one between fork and the preexec_fn's prctl does).
        deadline = time.monotonic() + 30  # a hang guard
        while b"sleep" not in _cmdline(child) and time.monotonic() < deadline:
            time.sleep(0.005)
        assert _state(child) in ("S", "R")
    finally:
        tool.kill()
        tool.wait()
        tool.stdout.close()
    deadline = time.monotonic() + 10  # a hang guard: the kernel kills it at once
    while _state(child) not in ("", "Z") and time.monotonic() < deadline:
        time.sleep(0.01)
    assert _state(child) in ("", "Z"), f"the tool's child {child} outlived it"


def test_the_way_is_setpriv_only_for_a_program_the_kernel_will_run(tmp_path):
    if not HAS_SETPRIV:
        pytest.skip("no setpriv with --pdeathsig on this machine")
    env = {"PATH": os.environ["PATH"]}
    program, preexec = spawning.how(["sleep", "1"], env, None)
    assert program == [spawning._wrapper(), "--pdeathsig", "KILL", "--", shutil.which("sleep"), "1"]
    assert preexec is None
    for argv in (["no-such-program-here"], [str(tmp_path)], ["./relative"]):
        program, preexec = spawning.how(argv, env, tmp_path)
        assert program == argv and preexec is spawning._die_with_parent
    with shielded():  # a vforked child would keep the held signals through its exec
        assert spawning.how(["sleep", "1"], env, None)[1] is spawning._die_with_parent


def _programs(tmp_path: Path) -> tuple[dict[str, list[str]], str]:
    """Programs that start and programs that cannot, each as an argv; and the PATH to find them on."""

    def script(name: str, text: bytes, mode: int = 0o755) -> str:
        path = tmp_path / name
        path.write_bytes(text)
        path.chmod(mode)
        return str(path)

    true = Path(shutil.which("true")).read_bytes()
    foreign = bytearray(true)
    foreign[18:20] = (0xB7).to_bytes(2, "little") if foreign[18:20] != b"\xb7\x00" else b"\x3e\x00"  # arm64 / x86-64
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    (first / "twice").mkdir()  # a directory where PATH's first match would be: subprocess goes on
    script("second/twice", b"#!/bin/sh\necho second\n")
    return {
        "missing": ["no-such-program-here"],
        "missing path": [str(tmp_path / "nothing")],
        "directory": [str(tmp_path)],
        "not executable": [script("plain", b"#!/bin/sh\necho hi\n", 0o644)],
        "no #! line": [script("noline", b"echo from sh\n")],
        "empty": [script("empty", b"")],
        "missing interpreter": [script("lost", b"#!/no/such/interpreter\n")],
        "relative interpreter": [script("rel", b"#!sh\necho hi\n")],
        "foreign machine": [script("foreign", bytes(foreign))],
        "a script": [script("ok", b'#!/bin/sh\necho "ran $1"\n'), "one"],
        "a script through env": [script("envd", b'#!/usr/bin/env sh\necho "ran $1"\n'), "two"],
        "elf": [shutil.which("echo"), "three"],
        "second on PATH": ["twice"],
        "fifo": [_fifo(tmp_path / "fifo")],
    }, f"{first}:{second}:{os.environ['PATH']}"


def _fifo(path: Path) -> str:
    os.mkfifo(path)
    path.chmod(0o755)
    return str(path)


def _plainly(argv: list[str], env: dict) -> tuple[int | None, str]:
    """What ``subprocess`` itself says of ``argv``: (exit status, stdout), or (None, the error)."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=30)
    except OSError as error:
        return None, str(error)
    return done.returncode, done.stdout


def test_each_program_starts_or_fails_as_subprocess_says(tmp_path, way):
    programs, path = _programs(tmp_path)
    env = {"PATH": path}
    runner = Runner(None)
    for name, argv in programs.items():
        code, said = _plainly(argv, env)
        for done in (runner.capture(argv, env=env), runner.run(argv, env=env, clean=True)):
            if code is None:
                assert (done.started, done.returncode) == (False, 127), (name, done)
                assert f"could not start {argv[0]}: {said}" in done.stderr + done.output, (name, done)
            else:
                assert (done.started, done.returncode, done.stdout) == (True, code, said), (name, done)


def test_a_child_gets_no_blocked_signal_even_from_inside_shielded(way):
    runner = Runner(None)
    probe = ["sh", "-c", "grep SigBlk /proc/self/status"]
    outside = runner.capture(probe).output.split()
    with shielded():
        inside = runner.capture(probe).output.split()
    assert outside == inside == ["SigBlk:", "0" * 16]


def test_the_child_sees_the_program_it_runs_as_its_first_word(way):
    done = Runner(None).capture(["cat", "/proc/self/cmdline"])
    first = done.output.split("\0")[0]
    assert first == (shutil.which("cat") if way == "vfork" else "cat")


DEFAULT_ACTION = r"""
import os, signal, subprocess, sys
from tfgpu.process import runner as proc

pids = sys.argv[1]
original_init = subprocess.Popen.__init__

def init(self, *args, **options):  # a SIGTERM the moment the child is started: no handler of the tool's
    original_init(self, *args, **options)
    open(pids, "w").write(str(self.pid))
    os.kill(os.getpid(), signal.SIGTERM)

subprocess.Popen.__init__ = init
proc.Runner(None).start(["sleep", "30"])
print("still here")
"""


def test_a_signal_left_at_its_default_ends_the_process_after_the_child(tmp_path):
    pids = tmp_path / "pid"
    done = subprocess.run([sys.executable, "-c", DEFAULT_ACTION, str(pids)], capture_output=True, text=True, timeout=60)
    assert done.returncode == -signal.SIGTERM, done.stdout + done.stderr
    assert "still here" not in done.stdout
    assert _state(int(pids.read_text())) == "", "the child was not stopped and reaped before the process ended"


def test_a_probe_never_execs_a_fifo_or_hangs_on_one(tmp_path, way):
    fifo = _fifo(tmp_path / "prog")
    done = Runner(None).capture([fifo], timeout=10)
    assert not done.started and "Permission denied" in done.stderr
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_a_child_started_from_another_thread_runs_and_dies_with_that_thread(way):
    """Outside the main thread no handler can be swapped (nor runs): the child starts as in the
    main thread; the kernel's death signal follows the thread that started it (doctor's probe)."""
    import threading

    answers = []
    thread = threading.Thread(target=lambda: answers.append(Runner(None).capture(["echo", "from a thread"])))
    thread.start()
    thread.join(30)
    assert [(a.started, a.returncode, a.output) for a in answers] == [(True, 0, "from a thread\n")]
