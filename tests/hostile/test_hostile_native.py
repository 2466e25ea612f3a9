"""The conda engine's native code cannot take the tool down, and every failure's log says what
failed.

py-rattler runs its work on native threads that may outlive the interpreter: a lock against a
channel that refuses connections used to end, now and then, in SIGABRT ("PyGILState_Release …
finalizing") after the error was printed. The tool runs rattler's work in a child process
(``tfgpu.engines.rattler_child``), so the tool's own exit is the documented one every time, and a
crash of the engine is ``engine-crashed`` naming the operation and the log.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

PY = f"{sys.version_info.major}.{sys.version_info.minor}"


def refused_channel() -> str:
    """A loopback channel URL on a port nothing listens on (connections are refused at once)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/ch"


def lock_argv(out: Path, channel: str) -> list[str]:
    return [
        "lock",
        "--tf",
        "2.13",
        "--mode",
        "conda",
        "--python",
        PY,
        "--no-detect",
        "--channel",
        channel,
        "--platform",
        "linux-64",
        "-o",
        str(out),
    ]


def run_process(argv: list[str], env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tfgpu", *argv], capture_output=True, text=True, env={**os.environ, **env}, timeout=300
    )


def the_log(logs: Path) -> str:
    found = sorted(logs.glob("*.log"))
    assert len(found) == 1, found
    return found[0].read_text(encoding="utf-8")


@pytest.mark.slow
def test_an_unreachable_channel_ends_with_its_error_every_time(sandbox):
    """Five runs as processes of their own: exit 1 and channel-unreachable each time, never a
    signal, a "Fatal Python error" or a traceback (the crash needed the interpreter's exit)."""
    channel = refused_channel()
    codes = []
    for attempt in range(5):
        home = sandbox / f"home{attempt}"
        done = run_process(
            lock_argv(home / "conda-lock.yml", channel), {"HOME": str(home), "TFGPU_LOG_DIR": str(home / "logs")}
        )
        codes.append(done.returncode)
        assert "error: channel-unreachable" in done.stderr, done.stderr
        assert "Fatal Python error" not in done.stderr and "Traceback" not in done.stderr, done.stderr
        assert not (home / "conda-lock.yml").exists()
    assert codes == [1] * 5


def test_a_failed_conda_lock_leaves_a_log_naming_the_solve_and_the_error(cli, sandbox):
    channel = refused_channel()
    done = cli(*lock_argv(sandbox / "conda-lock.yml", channel))
    assert done.code == 1 and "error: channel-unreachable" in done.err
    log = the_log(sandbox / "logs")
    assert str(sandbox / "logs") in done.err  # the message names the log
    assert "rattler solve: linux-64" in log and channel in log and "cudatoolkit" in log  # what was attempted
    assert "Connection refused" in log  # the engine's own error
    assert "failed: channel-unreachable" in log  # and the error the user saw
    assert not (sandbox / "conda-lock.yml").exists()


def test_a_failed_conda_create_leaves_a_log_naming_the_solve_and_the_error(cli, sandbox):
    channel = refused_channel()
    prefix = sandbox / "env"
    done = cli(
        "create",
        "--tf",
        "2.13",
        "--mode",
        "conda",
        "--python",
        PY,
        "--driver",
        "535.104.05",
        "--prefix",
        str(prefix),
        "--channel",
        channel,
        "--no-verify",
    )
    assert done.code == 1 and "error: channel-unreachable" in done.err
    log = the_log(sandbox / "logs")
    assert str(sandbox / "logs") in done.err
    assert "rattler solve: linux-64" in log and channel in log and "Connection refused" in log
    assert "failed: channel-unreachable" in log
    assert not prefix.exists() and not [p for p in sandbox.iterdir() if p.name.startswith(".env")]


def test_an_engine_that_dies_is_engine_crashed_naming_the_operation_and_the_log(sandbox, monkeypatch):
    """The engine's process killed by a signal (as the native crash did): a clean OperationError
    naming the operation, the signal and the log, which holds the attempt."""
    from tfgpu.engines import rattler_engine
    from tfgpu.errors import OperationError
    from tfgpu.process.runner import Runner

    crashing = sandbox / "python"
    crashing.write_text("#!/bin/sh\necho 'engine starting'\nkill -ABRT $$\n")
    crashing.chmod(0o755)
    monkeypatch.setattr(rattler_engine.sys, "executable", str(crashing))
    runner = Runner(sandbox / "crash.log")
    with pytest.raises(OperationError) as raised:
        rattler_engine.solve(
            ["python 3.11.*"],
            ["https://conda.anaconda.org/conda-forge"],
            platform="linux-64",
            cuda=None,
            this_host=False,
            repodata_cache=sandbox / "cache",
            offline=True,
            runner=runner,
        )
    error = raised.value
    assert error.code == "engine-crashed"
    assert "SIGABRT" in error.message and "solve" in error.message and "python 3.11.*" in error.message
    assert any(str(sandbox / "crash.log") in line for line in error.alternatives)
    log = (sandbox / "crash.log").read_text()
    assert "engine starting" in log and "rattler_child" in log


def test_the_engine_process_answers_in_json_and_never_finalises(sandbox):
    """The child protocol itself: a request on stdin, the answer in the named file, an error as
    data (a local channel that is not there), exit 0 through os._exit."""
    result = sandbox / "answer.json"
    request = {
        "op": "query",
        "what": "a missing channel",
        "result": str(result),
        "channels": [(sandbox / "no-channel").as_uri()],
        "platforms": ["linux-64", "noarch"],
        "names": ["python"],
        "repodata_cache": str(sandbox / "cache"),
        "offline": False,
    }
    done = subprocess.run(
        [sys.executable, "-m", "tfgpu.engines.rattler_child"],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("rattler query: a missing channel")
    answer = json.loads(result.read_text())
    assert set(answer) in ({"error"}, {"records"})
