"""The live lines of a step, in process: what the reporter draws on a terminal, rendered by a
terminal emulator (``pyte``, tests/termscreen.py's), and the plain lines on a pipe. The end-to-end
runs of the real command line on a pseudo-terminal are tests/test_terminal_display.py (slow)."""

from __future__ import annotations

import io
import sys
import time

import pyte
import pytest
from rich.text import Text

from tfgpu.cli.render import bars, live
from tfgpu.engines.uv_progress import UvProgress
from tfgpu.progress import RecordingReporter

MB = 10**6
MIB = 1 << 20


class Terminal(io.StringIO):
    """stderr as a terminal ``columns`` wide (rich's ``TTY_COMPATIBLE``), kept for an emulator."""

    def isatty(self) -> bool:
        return True


def rendered(text: str, columns: int) -> list[str]:
    """The scrollback and the screen after ``text`` is drawn on a ``columns``-wide terminal."""
    screen = pyte.HistoryScreen(columns, 24, history=10_000, ratio=0.5)
    pyte.Stream(screen).feed(text.replace("\n", "\r\n"))
    history = ["".join(line[x].data for x in range(columns)) for line in screen.history.top]
    return [row.rstrip() for row in history + screen.display]


@pytest.fixture
def terminal(monkeypatch):
    def make(columns: int) -> Terminal:
        stream = Terminal()
        monkeypatch.setenv("TTY_COMPATIBLE", "1")
        monkeypatch.setenv("COLUMNS", str(columns))
        monkeypatch.delenv("NO_COLOR", raising=False)
        monkeypatch.setattr(sys, "stderr", stream)
        return stream

    return make


def test_an_interrupted_transfer_on_a_terminal_says_it_stopped(terminal):
    stream = terminal(80)
    reporter = live.ConsoleReporter()
    reporter.step(4, 10, "Install TensorFlow")
    reporter.transfer("PyPI wheels", 668_400_000, 2_500_000_000)
    time.sleep(0.3)
    reporter.close()  # a Ctrl-C, a failure: the step never finished
    last = [row for row in rendered(stream.getvalue(), 80) if "PyPI wheels" in row]
    assert len(last) == 1 and "0.7/2.5 GB" in last[0], last
    assert "stopped after 0:00" in last[0] and " in 0:" not in last[0] and "/s" not in last[0], last


def test_an_interrupted_transfer_on_a_pipe_says_it_stopped(monkeypatch):
    pipe = io.StringIO()
    monkeypatch.setattr(sys, "stderr", pipe)
    clock = iter(range(0, 100, 17)).__next__
    reporter = live.ConsoleReporter(clock=clock)
    reporter.step(4, 10, "Install TensorFlow")
    reporter.transfer("PyPI wheels", 668_400_000, 2_500_000_000)
    reporter.close()
    lines = [line for line in pipe.getvalue().splitlines() if "PyPI wheels" in line]
    assert lines[-1] == "  PyPI wheels: stopped at 668.4 MB of 2.5 GB (26%) after 0:17", lines


def test_a_finished_step_says_how_long_its_transfer_took(monkeypatch):
    pipe = io.StringIO()
    monkeypatch.setattr(sys, "stderr", pipe)
    clock = iter(range(0, 100, 17)).__next__
    reporter = live.ConsoleReporter(clock=clock)
    reporter.step(4, 10, "Install TensorFlow")
    reporter.transfer("conda packages", 20 * MB, None)
    reporter.done(4, 10, "Install TensorFlow", 0.5)
    reporter.close()
    lines = [line for line in pipe.getvalue().splitlines() if "conda packages" in line]
    assert lines[-1].startswith("  conda packages: 20.0 MB") and " in 0:" in lines[-1] and "stopped" not in lines[-1]


@pytest.mark.parametrize("columns", [80, 120, 160, 200])
def test_a_transfer_that_completes_and_grows_again_stays_one_line(terminal, columns):
    """uv starts more downloads after the first are in: the same transfer, the same line."""
    stream = terminal(columns)
    reporter = live.ConsoleReporter()
    reporter.step(4, 10, "Install TensorFlow and its CUDA libraries (compiling bytecode)")
    for done, total in ((1_000, 2_700), (2_700, 2_700), (2_700, 30 * MB), (15 * MB, 58 * MB), (58 * MB, 58 * MB)):
        reporter.transfer("PyPI wheels", done, total)
        time.sleep(0.15)  # the display redraws ten times a second
    reporter.done(4, 10, "Install", 2.0)
    reporter.close()
    rows = rendered(stream.getvalue(), columns)
    bars_left = [row for row in rows if "PyPI wheels" in row]
    assert len(bars_left) == 1, rows
    assert "58.0/58.0 MB" in bars_left[0] and " in 0:" in bars_left[0]
    assert all(len(row) < columns for row in rows if "PyPI" in row or "Install" in row)


@pytest.mark.parametrize("width", [20, 40, 60, 80, 120, 160, 200])
def test_every_live_line_fits_the_terminal_less_a_column(width):
    """A line as wide as the terminal wraps where a glyph is drawn two cells wide; a wrapped line
    makes every redraw leave a copy behind. Long labels, unknown totals and stopped transfers too."""
    board = bars.Board("[4/10] Install TensorFlow and its CUDA libraries (compiling bytecode)" * 2)
    board.detail = "Downloading https://example.org/" + "x" * 300
    board.transfer("PyPI wheels", 123 * MB, 3_400 * MB)
    board.transfer("nvidia-cusparselt-cu12 0.6.3 " * 4, 5 * MB, None)
    stopped = board.transfer("tensorflow 2.21.0", 100, 1_000)
    stopped.outcome = "stopped"
    lines = board.lines(width)
    assert len(lines) == 4
    assert all(isinstance(line, Text) and 0 < line.cell_len <= width - 1 for line in lines), [
        (line.cell_len, line.plain) for line in lines
    ]


def test_a_line_says_rate_and_time_left_once_a_second_has_passed():
    transfer = bars.Transfer("PyPI wheels", 0.0)
    transfer.update(0, 100 * MB, 0.0)
    assert "left" in transfer.line(80, 0.5).plain and "MB/s" not in transfer.line(80, 0.5).plain
    transfer.update(20 * MB, 100 * MB, 2.0)
    line = transfer.line(80, 2.0).plain
    assert "20.0/100.0 MB" in line and "10.0 MB/s" in line and "0:08 left" in line
    # Nothing moves: the rate falls as the seconds pass, it does not stay at its last value.
    assert "2.0 MB/s" in transfer.line(80, 10.0).plain
    unknown = bars.Transfer("conda packages", 0.0)
    unknown.update(5 * MB, None, 0.0)
    assert "5.0 MB of a total not known" in unknown.line(80, 0.0).plain


def frame(prepared: int, count: int, *downloads: tuple[str, float, float]) -> str:
    drawn = "".join(f"  {name} ------------------------------ {d:.2f} MiB/{t:.2f} MiB" for name, d, t in downloads)
    return f"\r\x1b[2K\x1b[2mPreparing packages...\x1b[0m ({prepared}/{count}){drawn}"


def test_uvs_total_is_said_only_once_every_download_to_come_is_drawn():
    """uv starts its downloads one after another: the sum of those drawn so far is a part that
    grows, not the total; the bytes are reported with no total until every one is drawn."""
    reporter = RecordingReporter()
    watch = UvProgress(reporter)
    watch.feed(frame(0, 3, ("tensorflow", 1, 600)))
    watch.feed(frame(0, 3, ("tensorflow", 2, 600), ("numpy", 1, 16)))
    watch.feed(frame(0, 3, ("tensorflow", 3, 600), ("numpy", 2, 16), ("scipy", 1, 32)))
    watch.feed(frame(1, 3, ("tensorflow", 50, 600), ("scipy", 2, 32)))
    watch.feed(frame(1, 3, ("tensorflow", 60, 600), ("scipy", 3, 32)))
    said = reporter.transfers()
    assert [total for _, total in said[:2]] == [None, None]
    assert {total for _, total in said[2:]} == {648 * MIB}
    watch.finish()
    assert reporter.transfers()[-1] == (648 * MIB, 648 * MIB)


def test_a_transfers_last_line_fits_a_narrow_terminal_numbers_first(terminal):
    """The last line of a transfer printed to stay is cut to the width less a column, like the live one."""
    stream = terminal(40)
    reporter = live.ConsoleReporter()
    reporter.step(1, 1, "Download")
    reporter.transfer("cuda_12.9.1_575.57.08_linux.run with a long name", 5 * MB, 5 * MB)
    reporter.done(1, 1, "Download", 0.1)
    reporter.close()
    rows = rendered(stream.getvalue(), 40)
    last = [row for row in rows if "cuda_" in row]
    assert len(last) == 1 and "5.0/5.0 MB" in last[0], rows  # the numbers before the whole label
    assert all(len(row) < 40 for row in rows), rows


def test_a_label_from_a_url_reaches_the_terminal_without_its_control_characters():
    board = bars.Board("[1/1] Download \x1b]0;retitled\x07")
    board.transfer("cuda\x1b[2J.run", 1, 2)
    drawn = "".join(line.plain for line in board.lines(120))
    assert "\x1b" not in drawn and "\x07" not in drawn and "cuda\\x1b[2J.run" in drawn


def test_uvs_total_stays_whole_while_a_download_that_is_in_is_unpacked():
    """A download that is in loses its bar before uv counts it prepared: for a moment fewer bars
    are drawn than packages remain, and that is no new package: the total stays."""
    reporter = RecordingReporter()
    watch = UvProgress(reporter)
    watch.feed(frame(0, 2, ("tensorflow", 1, 600), ("numpy", 1, 16)))
    watch.feed(frame(0, 2, ("tensorflow", 300, 600)))  # numpy is in, not yet unpacked
    watch.feed(frame(1, 2, ("tensorflow", 400, 600)))
    watch.feed(frame(1, 2))
    assert {total for _, total in reporter.transfers()} == {616 * MIB}


def test_on_a_pipe_a_transfer_that_stopped_after_its_last_line_still_says_it_stopped(monkeypatch):
    pipe = io.StringIO()
    monkeypatch.setattr(sys, "stderr", pipe)
    clock = iter(range(0, 100, 11)).__next__
    reporter = live.ConsoleReporter(clock=clock)
    reporter.step(1, 1, "Download")
    reporter.transfer("cuda.run", 1 * MB, 4 * MB)
    reporter.transfer("cuda.run", 2 * MB, 4 * MB)  # eleven seconds on: a plain line of its bytes
    reporter.close()
    lines = [line for line in pipe.getvalue().splitlines() if "cuda.run" in line]
    assert lines[-1].startswith("  cuda.run: stopped at 2.0 MB of 4.0 MB (50%) after "), lines
