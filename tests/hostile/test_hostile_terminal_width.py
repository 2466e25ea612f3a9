"""A terminal narrower than ``COLUMNS`` says: the variable exported (a profile, a wrapper script)
and never true, or true until the window was made narrower mid-run (TIOCSWINSZ and SIGWINCH, as a
terminal emulator does). A live display drawn to ``COLUMNS`` wraps every redraw onto rows it cannot
erase; before, the scrollback held dozens of stacked copies of the spinner line. Now the display is
never wider than the terminal, so the step's line is drawn once and the run ends with the truth.

Real components: the command line on a real pseudo-terminal, real uv downloading from a loopback
index that sends its files slowly (tests/localindex.py), everything drawn rendered by ``pyte``."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import signal
import struct
import subprocess
import sys
import termios

import pytest

pytestmark = pytest.mark.slow  # a real slow server: seconds per case

SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"


@pytest.fixture(scope="module")
def slow_index(local_wheels, tmp_path_factory):
    import localindex

    root = localindex.build_index(local_wheels, tmp_path_factory.mktemp("index"))
    with localindex.Server(root, drip=0.05) as url:
        yield url


def _drawn(argv, env, columns: int, narrower: int | None) -> tuple[int, list[str], int]:
    """Run on a ``columns``-wide pty; ``narrower``: the window shrinks to it once the install step
    shows. The exit code, every row of the scrollback and screen, and the width at the end."""
    pyte = pytest.importorskip("pyte")
    screen = pyte.HistoryScreen(columns, 30, history=100_000, ratio=0.5)
    stream = pyte.ByteStream(screen)
    master, child = pty.openpty()
    fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", 30, columns, 0, 0))
    process = subprocess.Popen(argv, stdin=child, stdout=child, stderr=child, env=env, start_new_session=True)
    os.close(child)
    raw, width = b"", columns
    try:
        while True:
            ready, _, _ = select.select([master], [], [], 240)
            if not ready:  # a hang guard only
                process.kill()
                break
            try:
                chunk = os.read(master, 1 << 16)
            except OSError:
                break
            if not chunk:
                break
            raw += chunk
            stream.feed(chunk)
            if narrower and width != narrower and b"Install TensorFlow" in raw:
                width = narrower
                screen.resize(30, width)
                fcntl.ioctl(master, termios.TIOCSWINSZ, struct.pack("HHHH", 30, width, 0, 0))
                os.kill(process.pid, signal.SIGWINCH)
    finally:
        os.close(master)
    returncode = process.wait(timeout=60)
    rows = ["".join(line[x].data for x in range(width)).rstrip() for line in screen.history.top]
    return returncode, [r for r in rows + [r.rstrip() for r in screen.display] if r.strip()], width


@pytest.mark.parametrize(
    "columns,exported,narrower", [(60, "200", None), (120, "120", 40)], ids=["stale-columns", "resized-mid-run"]
)
def test_the_live_display_is_never_wider_than_the_terminal(tmp_path, tool_env, slow_index, columns, exported, narrower):
    env = {k: v for k, v in tool_env.items() if k not in ("NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE")}
    env.update(UV_DEFAULT_INDEX=slow_index, TERM="xterm-256color", COLUMNS=exported, TFGPU_INSECURE_HOSTS="127.0.0.1")
    env.update(TFGPU_CACHE_DIR=str(tmp_path / "cold-cache"))  # every wheel comes from the slow index
    argv = [sys.executable, "-m", "tfgpu", "create", "--tf", "2.21", "--mode", "pip", "--python", "3.11"]
    argv += ["--prefix", str(tmp_path / "env"), "--no-verify"]
    returncode, rows, _ = _drawn(argv, env, columns, narrower)
    text = "\n".join(rows)
    assert returncode == 0, text[-3000:]
    stacked = [row for row in rows if row[:1] and row[0] in SPINNER]
    assert stacked == [], text[-3000:]
    assert sum("[4/10] Install TensorFlow" in row for row in rows) == 1, text[-3000:]
    assert rows[-1].strip() and "TensorFlow 2.21.0" in text.split("[10/10]")[-1]
