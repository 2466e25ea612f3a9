"""What the child-process door watches while uv runs: the floor on its downloads' pace, and the
half-written entries a stopped uv leaves in its cache. Real child processes, real /proc."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import tfgpu
from tfgpu.engines import download
from tfgpu.process import childwatch


def test_uvs_floor_is_the_tools_own():
    assert (childwatch.MIN_RATE, childwatch.MAX_SECONDS) == (download.MIN_RATE, download.MAX_SECONDS)


@pytest.mark.parametrize(
    "argv,fetches",
    [
        (["/x/uv", "pip", "install", "--cache-dir", "/c", "tensorflow"], True),
        (["uv", "pip", "compile", "in.txt"], True),
        (["uv", "venv", "/env"], True),
        (["uv", "cache", "clean", "--cache-dir", "/c"], False),  # deletes: reads little, and rightly
        (["pip", "install", "x"], False),
        ([], False),
    ],
)
def test_the_floor_is_for_uvs_commands_that_fetch(argv, fetches):
    assert childwatch.downloads(argv) is fetches


def test_the_cache_is_the_one_uv_is_told():
    assert childwatch.cache_of(["uv", "pip", "install", "--cache-dir", "/c", "x"]) == Path("/c")
    assert childwatch.cache_of(["uv", "pip", "install", "--cache-dir=/d"]) == Path("/d")
    assert childwatch.cache_of(["python", "--cache-dir", "/c"]) is None


def test_only_what_appeared_during_the_run_is_swept(tmp_path):
    (tmp_path / ".tmpBefore").mkdir()
    (tmp_path / "wheels-v5").mkdir()
    scratch = childwatch.Scratch(tmp_path)
    (tmp_path / ".tmpDuring").mkdir()
    (tmp_path / ".tmpDuring" / "part.whl").write_bytes(b"x" * 1000)
    (tmp_path / ".tmpFile").write_bytes(b"x")
    removed = scratch.sweep()
    assert sorted(p.name for p in removed) == [".tmpDuring", ".tmpFile"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [".tmpBefore", "wheels-v5"]


def test_an_entry_another_process_still_writes_in_is_kept(tmp_path):
    """The user's own uv, sharing the cache and started during the run, still writes into its
    ``.tmp*`` entry: that one is not this run's to remove."""
    scratch = childwatch.Scratch(tmp_path)
    (tmp_path / ".tmpTheirs").mkdir()
    (tmp_path / ".tmpOurs").mkdir()
    other = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; f = open(sys.argv[1], 'wb'); print(flush=True); time.sleep(60)",
            str(tmp_path / ".tmpTheirs" / "part.whl"),
        ],
        stdout=subprocess.PIPE,
    )
    try:
        other.stdout.readline()  # the file is open
        removed = scratch.sweep()
    finally:
        other.kill()
        other.wait()
    assert [p.name for p in removed] == [".tmpOurs"]
    assert (tmp_path / ".tmpTheirs" / "part.whl").exists()


def _watched(code: str, window: float) -> tuple[childwatch.Floor, subprocess.Popen]:
    child = subprocess.Popen([sys.executable, "-c", code])
    floor = childwatch.Floor(child, lambda c: c.kill(), window=window, sample=window / 4)
    floor._thread.start()
    return floor, child


def test_a_child_that_barely_moves_is_stopped_with_the_reason():
    floor, child = _watched("import time; time.sleep(60)", window=1.0)
    child.wait(timeout=30)  # a hang guard: stopped after about one window
    assert "stalled" in floor.reason and "less than 32 KiB/s" in floor.reason


def test_a_child_that_moves_is_left_alone():
    """A child writing 64 KiB every 10 ms (about 200 times the floor) for two and a half windows,
    paced so that it moves without spinning a CPU for the whole time."""
    code = (
        "import os, time\nsink = os.open(os.devnull, os.O_WRONLY)\nend = time.time() + 2.5\n"
        "while time.time() < end:\n    os.write(sink, b'.' * 65536)\n    time.sleep(0.01)\n"
    )
    floor, child = _watched(code, 1.0)
    assert child.wait(timeout=30) == 0
    floor.cancel()
    assert floor.reason == ""


def test_every_child_is_started_inside_the_signal_hold():
    """A Popen outside ``supervised`` would let a signal in before the child is in hand."""
    tree = ast.parse((Path(tfgpu.__file__).parent / "process/runner.py").read_text(encoding="utf-8"))
    held = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "supervised":
            held |= {id(inner) for inner in ast.walk(node.args[0])}
    popens = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "Popen"
    ]
    assert popens and all(id(call) in held for call in popens), [call.lineno for call in popens if id(call) not in held]
