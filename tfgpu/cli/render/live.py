"""Progress as people see it on stderr while the tool works: each step's title, a spinner while it
runs, and a bar for every transfer (bytes, total, rate, time left); on a pipe or in a log, the
titles and a plain line per transfer at least every :data:`PLAIN_EVERY` seconds, and one at its end.
Part of the CLI layer, with ``tfgpu.cli.render.results`` (which prints the results through the same streams).

A live display (the spinner line and a line per transfer: ``tfgpu.cli.render.bars``) owns the lines at the
bottom of the terminal and redraws them in place for the whole step. Everything else printed must
not land on them: what goes to stderr goes through the console the display runs on, so rich prints
it above the display; what goes to stdout (another console, the same terminal) first takes the
display off (:class:`Ending`), and it comes back at the next news. A transfer's line stays in the
display while it runs, and also once complete (uv's downloads complete and then grow again as uv
starts more: the same line goes on) until another transfer moves or the step ends; then its last
line is printed to stay: complete, or stopped part way when the step never finished (an interrupt,
a failure), never a line that reads like a success. The spinner goes.
"""

from __future__ import annotations

import time

from rich.filesize import decimal
from rich.markup import escape

from tfgpu.cli.render.bars import Board, Transfer, clock_text
from tfgpu.cli.render.console import Stream
from tfgpu.doors.controls import shown
from tfgpu.progress import Reporter

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing: type checkers treat it alike
if TYPE_CHECKING:
    from typing import Any

    from rich.live import Live

PLAIN_EVERY = 10.0
"""Seconds between two plain lines of one transfer (a log or a pipe reads one line per transfer
per this many seconds, never a flood)."""


class Ending(Stream):
    """A stream whose every print first stops the live display, if one runs (see the module)."""

    def print(self, *objects, **options) -> None:
        if ConsoleReporter.active is not None:
            ConsoleReporter.active.pause_live()
        super().print(*objects, **options)


out = Ending()
err = Stream(stderr=True)


def plain_line(
    label: str, done: int, total: int | None, seconds: float, rate: float, *, end: bool, stopped: bool = False
) -> str:
    """``PyPI wheels: 1.2 GB of 3.4 GB (35%), 48.0 MB/s, 0:45 left`` (``end``: how long it took;
    ``stopped``: the transfer broke off, and its line says so, not how long it "took")."""
    if total:
        text = f"{label}: {decimal(done)} of {decimal(total)} ({100 * done // total}%)"
    else:
        text = f"{label}: {decimal(done)}{'' if end else ' so far'}"
    if stopped:
        at = f"{decimal(done)} of {decimal(total)} ({100 * done // total}%)" if total else decimal(done)
        return f"{label}: stopped at {at} after {clock_text(seconds)}"
    if rate > 0:
        text += f", {decimal(int(rate))}/s"
    if end:
        return text + f" in {clock_text(seconds)}"
    if total and rate > 0 and done < total:
        text += f", {clock_text((total - done) / rate)} left"
    return text


_IN_PLACE: dict[str, Any] = {"redirect_stdout": False, "redirect_stderr": False, "refresh_per_second": 10}
"""rich's live displays leave ``sys.stdout``/``sys.stderr`` alone: redirected, stdout's lines would
go to stderr, and a print to stderr would reach a new console on rich's proxy that does not know
where the display's line is (a note glued to the end of the bar). Prints go through the display's
own console instead (``err``), or stop it first (``out``)."""


class _Plain:
    """One transfer as plain lines: when it began, what was said last."""

    def __init__(self, now: float, done: int) -> None:
        self.began, self.first, self.said_at = now, done, now
        self.total: int | None = None
        self.done, self.said, self.ended = done, -1, False


class ConsoleReporter(Reporter):
    """Progress of a long run on stderr (stdout stays clean for --json). ``clock``: seconds, for
    the plain lines' pace and rate (tests give a fake one)."""

    active: ConsoleReporter | None = None
    """The reporter whose display may be live (stdout's prints stop it first)."""

    def __init__(self, clock=time.monotonic) -> None:
        self._clock = clock
        self._live: Live | None = None
        self._board: Board | None = None
        self._said: dict[str, tuple] = {}
        """The transfers whose last line is printed, at the bytes it said (a repeat is no news)."""
        self._plain: dict[str, _Plain] = {}
        self._title = ""
        self._working = False
        """A step has begun and not finished: a transfer that ends now broke off."""
        ConsoleReporter.active = self

    def pause_live(self) -> None:
        """Take the live display off the terminal (stdout is about to print on its line); the
        transfers under way stay, and come back with it at their next news."""
        live, self._live = self._live, None
        if live is not None:
            try:
                live.stop()
            except Exception:  # noqa: BLE001 - a Ctrl-C inside rich's live display must not mask the outcome
                pass

    def stop_live(self) -> None:
        """Stop the live display: the spinner goes, and every transfer on it gets its last line,
        printed to stay (complete, or stopped part way: :meth:`_last`); a plain transfer that has not
        had its last word gets it."""
        self.pause_live()
        board, self._board = self._board, None
        if board is not None:
            for transfer in list(board.transfers.values()):
                self._last(transfer, stopped=self._working)
        for label, state in self._plain.items():
            stopped = self._working and not _whole(state.done, state.total)
            if not state.ended and (state.said != state.done or stopped):
                self._say(label, state, end=True, stopped=stopped)
        self._plain = {}

    def _shown(self) -> Board | None:
        """The live display of the step (started if it is not running); None when not a terminal."""
        if err.plain:
            return None
        if self._board is None:
            self._board = Board(self._title)
        if self._live is None:
            # Start-up cost: `plan` loads this module but not rich.live.
            from rich.live import Live

            self._live = Live(self._board, console=err.console(), transient=True, **_IN_PLACE)
            self._live.start()
        return self._board

    def step(self, index: int, total: int, title: str) -> None:
        self.stop_live()
        self._title = f"[{index}/{total}] {title}"
        err.print(f"[bold]{escape(self._title)}[/]")
        self._said = {}
        self._working = True
        self._shown()

    def output(self, line: str) -> None:
        if self._board is not None and line.strip():
            # A child's line (uv's, on a pseudo-terminal: what a package's metadata says) is untrusted text.
            self._board.detail = shown(line.strip()[:200])
            self._shown()  # back on the terminal, if stdout took it off

    def transfer(self, label: str, done: int, total: int | None) -> None:
        if err.plain:
            self._plain_transfer(label, done, total)
        else:
            self._bar(label, done, total)

    def _bar(self, label: str, done: int, total: int | None) -> None:
        if self._said.get(label) == (done, total):
            return  # its last line is printed; a repeat of its end is no news
        self._said.pop(label, None)
        board = self._shown()
        assert board is not None  # a bar is drawn only on a terminal
        moving = board.transfer(label, done, total)
        # One line per transfer under way, redrawn in place. A transfer that is complete stays (a
        # transfer that grows again, as uv's downloads do when it starts more, goes on in the same
        # line) until another one moves: then it is printed to stay, and the live lines stay few.
        for other in list(board.transfers.values()):
            if other is not moving and other.complete:
                board.take(other.label)
                self._last(other, stopped=False)

    def _last(self, transfer: Transfer, *, stopped: bool) -> None:
        """The transfer's last line, printed to stay: complete (its bytes, rate, how long it took),
        or stopped part way (where it stopped: never a line that reads like a success)."""
        transfer.outcome = "stopped" if stopped and not transfer.complete else "complete"
        err.print(transfer.line(err.console().width - 1, self._clock()))
        self._said[transfer.label] = (transfer.done, transfer.total)

    def _plain_transfer(self, label: str, done: int, total: int | None) -> None:
        now = self._clock()
        state = self._plain.get(label)
        if state is not None and state.ended and (done == state.done or now - state.said_at < PLAIN_EVERY):
            state.done = done  # its last word was said; a repeat, or a redraw within the interval, is no news
            return
        if state is None or state.ended:
            state = self._plain[label] = _Plain(now, done)
        state.done, state.total = done, total
        if total and done >= total:
            self._say(label, state, end=True)
        elif now - state.said_at >= PLAIN_EVERY:
            self._say(label, state, end=False)

    def _say(self, label: str, state: _Plain, *, end: bool, stopped: bool = False) -> None:
        now = self._clock()
        seconds = now - state.began
        rate = (state.done - state.first) / seconds if seconds > 0 else 0.0
        line = plain_line(label, state.done, state.total, seconds, rate, end=end, stopped=stopped)
        err.print(f"  {escape(line)}")
        state.said_at, state.said, state.ended = now, state.done, end

    def done(self, index: int, total: int, title: str, seconds: float) -> None:
        self._working = False
        self.stop_live()
        if seconds >= 1:
            err.print(f"  [dim]done in {seconds:.1f} s[/]")

    def note(self, message: str) -> None:
        err.print(f"  [cyan]→[/] {escape(message)}")

    def close(self) -> None:
        self.stop_live()
        self._working = False
        if ConsoleReporter.active is self:
            ConsoleReporter.active = None


def _whole(done: int, total: int | None) -> bool:
    return total is not None and 0 < total <= done
