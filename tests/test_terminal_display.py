"""What a person sees on a terminal while a build downloads its wheels: the real command line
(``python -m tfgpu create``) on a real pseudo-terminal of 80, 120, 160 and 200 columns, a real uv
(and pip, ``--engine pip``) downloading from a loopback index that sends each file at a throttled
rate, and everything drawn rendered by a terminal emulator (tests/termscreen.py, ``pyte``) with a
scrollback. The assertions read the rendered screens and the scrollback: one bar, redrawn in place;
nothing stacked; a rate and the time left while it runs; the total the bytes the index served; the
step's line on the screen with the bar. The same in a real tmux where one is installed.

The index stands in for PyPI at the network boundary only (tests/localindex.py): stand-in wheels of
random bytes (tests/wheelhouse.py), their metadata beside them as PyPI serves it, so that uv's
resolve reads the metadata and the wheels move once, in the install step. The server's pace is
what makes the transfer take seconds; nothing here measures time.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import termscreen
import wheelhouse
from localindex import Server, build_index

pytestmark = pytest.mark.slow

MIB = 1 << 20
FILLER = {
    "tensorflow": 14 * MIB,
    "nvidia-cudnn-cu12": 11 * MIB,
    "nvidia-cublas-cu12": 9 * MIB,
    "nvidia-cuda-nvcc-cu12": 8 * MIB,
}
RATE = 5 * MIB
"""Bytes a second the index sends each file at: the largest wheel takes about three seconds."""
STEP = re.compile(r"\[\d+/\d+\] Install TensorFlow")
RATE_SHOWN = re.compile(r"\d+(\.\d)? [kMG]B/s")
LEFT_SHOWN = re.compile(r"\d+:\d\d left")


@pytest.fixture(scope="module")
def large_index(tmp_path_factory) -> Path:
    if not wheelhouse.have_compiler():
        pytest.skip("gcc is needed to build the test shared libraries")
    wheels = wheelhouse.tensorflow_wheelhouse(tmp_path_factory.mktemp("large-wheels"), filler=FILLER)
    return build_index(wheels, tmp_path_factory.mktemp("large-index"), metadata=True)


def wheel_bytes(index: Path) -> int:
    return sum(path.stat().st_size for path in (index / "files").glob("*.whl"))


def build(index: Path, tmp_path: Path, columns: int, *extra: str) -> tuple[termscreen.Capture, dict[str, int]]:
    """``create --tf 2.21 --mode pip`` from ``index`` on a terminal ``columns`` wide: the capture,
    and the bytes the index sent of each file."""
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX")}
    with (server := Server(index, rate=RATE)) as url:
        env.update(
            UV_DEFAULT_INDEX=url,
            PIP_INDEX_URL=url,
            PIP_CACHE_DIR=str(tmp_path / "pip-cache"),
            TFGPU_CACHE_DIR=str(tmp_path / "cache"),  # a cold uv cache: every wheel is downloaded
            TFGPU_LOG_DIR=str(tmp_path / "logs"),
        )
        argv = [sys.executable, "-m", "tfgpu", "create", "--tf", "2.21", "--mode", "pip", "--python", "3.11"]
        argv += ["--prefix", str(tmp_path / "env"), "--no-verify", *extra]
        capture = termscreen.run(argv, env, columns)
    assert capture.returncode == 0, capture.text()[-3000:]
    return capture, dict(server.sent)


def rows(screen: list[str], label: str) -> list[str]:
    return [row for row in screen if label in row]


def assert_drawn_in_place(capture: termscreen.Capture, label: str) -> None:
    """At every moment at most one line of ``label`` on the screen, and the step's line with it;
    afterwards one line of it in the whole scrollback (its last word); none wider than the screen."""
    seen = [shot for shot in capture.snapshots if rows(shot, label)]
    assert seen, capture.text()[-3000:]
    for shot in seen:
        assert len(rows(shot, label)) == 1, "\n".join(shot)
        assert any(STEP.search(row) for row in shot), "\n".join(shot)
    assert len(rows(capture.scrollback, label)) == 1, capture.text()
    for row in rows(capture.scrollback, label) + [row for shot in seen for row in rows(shot, label)]:
        assert len(row.rstrip()) < capture.columns, row  # a full-width line would wrap on some terminal


@pytest.mark.parametrize("columns", [80, 120, 160, 200])
def test_uvs_downloads_are_one_bar_redrawn_in_place_with_the_bytes_the_index_sent(large_index, tmp_path, columns):
    capture, sent = build(large_index, tmp_path, columns)
    assert_drawn_in_place(capture, "PyPI wheels")
    moving = [row for shot in capture.snapshots for row in rows(shot, "PyPI wheels")]
    assert any(RATE_SHOWN.search(row) and LEFT_SHOWN.search(row) for row in moving), "\n".join(moving[-20:])
    # The total shown is the bytes that came: every wheel's, each sent whole once.
    served = wheel_bytes(large_index)
    wheels = {path: n for path, n in sent.items() if path.endswith(".whl")}
    assert sum(wheels.values()) == served
    last = rows(capture.scrollback, "PyPI wheels")[0]
    done, total = (float(n) for n in re.search(r"(\d+\.\d)/(\d+\.\d) MB", last).groups())
    assert done == total and abs(total - served / 1e6) <= 0.1, (last, served)
    # Every total ever shown is that one, or none yet: never a part that grows, nor an estimate.
    totals = {float(t) for t in re.findall(r"/(\d+\.\d) MB", "\n".join(moving))}
    assert totals == {total}, totals


def test_pips_downloads_are_a_bar_each_redrawn_in_place(large_index, tmp_path):
    """``--engine pip``: pip downloads one file at a time and says its size as it starts it; each
    file is a bar of its own, and each leaves one line: its bytes, rate and time."""
    capture, _ = build(large_index, tmp_path, 80, "--engine", "pip")
    for dist in FILLER:
        stem = dist.replace("-", "_")
        label = f"{stem} " if dist != "tensorflow" else "tensorflow 2.21.0"
        assert_drawn_in_place(capture, label)
        last = rows(capture.scrollback, label)[0]
        assert re.search(r"(\d+\.\d)/\1 MB", last) and RATE_SHOWN.search(last) and " in 0:" in last, last
        size = next((large_index / "files").glob(f"{stem}-*.whl")).stat().st_size
        assert abs(float(re.search(r"/(\d+\.\d) MB", last).group(1)) - size / 1e6) <= 0.05, (last, size)
    moving = [row for shot in capture.snapshots for row in rows(shot, "tensorflow 2.21.0")]
    assert any(RATE_SHOWN.search(row) and LEFT_SHOWN.search(row) for row in moving), "\n".join(moving[-20:])


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (apt-get install tmux)")
@pytest.mark.parametrize("columns", [80, 160])
def test_in_tmux_the_bar_is_redrawn_in_place(large_index, tmp_path, columns):
    """A real tmux window of ``columns`` x 40: its screen polled while the build runs, and its whole
    scrollback afterwards (``capture-pane -S -``)."""
    socket = f"tfgpu-test-{os.getpid()}-{columns}"
    tmux = ["tmux", "-L", socket, "-f", "/dev/null"]
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX", "TMUX", "COLUMNS")}
    with Server(large_index, rate=RATE) as url:
        env.update(UV_DEFAULT_INDEX=url, TFGPU_CACHE_DIR=str(tmp_path / "cache"), TFGPU_LOG_DIR=str(tmp_path / "logs"))
        argv = [sys.executable, "-m", "tfgpu", "create", "--tf", "2.21", "--mode", "pip", "--python", "3.11"]
        argv += ["--prefix", str(tmp_path / "env"), "--no-verify"]
        script = tmp_path / "run.sh"
        # The window's shell inherits the tmux server's environment: this one.
        script.write_text(f'{shlex.join(argv)}; echo "exit=$?" > {shlex.quote(str(tmp_path / "rc"))}\n')
        subprocess.run(
            [*tmux, "new-session", "-d", "-x", str(columns), "-y", "40", "-s", "t", f"bash {script}; sleep 600"],
            env={**env, "TERM": "xterm-256color"},
            check=True,
        )
        try:
            screens = []
            deadline = time.monotonic() + 300
            while not (tmp_path / "rc").exists() and time.monotonic() < deadline:
                shown = subprocess.run([*tmux, "capture-pane", "-p", "-t", "t"], capture_output=True, text=True)
                screens.append(shown.stdout.splitlines())
                time.sleep(0.1)
            whole = subprocess.run([*tmux, "capture-pane", "-p", "-S", "-", "-t", "t"], capture_output=True, text=True)
        finally:
            subprocess.run([*tmux, "kill-server"], capture_output=True)
    assert (tmp_path / "rc").read_text().strip() == "exit=0", whole.stdout[-3000:]
    lines = whole.stdout.splitlines()
    assert len(rows(lines, "PyPI wheels")) == 1, whole.stdout
    seen = [shot for shot in screens if rows(shot, "PyPI wheels")]
    assert seen and all(len(rows(shot, "PyPI wheels")) == 1 for shot in seen)
    assert all(any(STEP.search(row) for row in shot) for shot in seen)
    assert any(RATE_SHOWN.search(row) and LEFT_SHOWN.search(row) for shot in seen for row in shot)
