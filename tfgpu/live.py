"""Progress as people see it on stderr while the tool works: each step's title, a spinner while it
runs, and a bar for every transfer (bytes, total, rate, time left); on a pipe or in a log, the
titles and a plain line per transfer at least every :data:`PLAIN_EVERY` seconds, and one at its end.
Part of the CLI layer, with ``tfgpu.render`` (which prints the results through the same streams).

A live display (the spinner, the bars) owns the line the cursor is on. Everything else printed
must not land on that line: what goes to stderr goes through the console the display runs on, so
rich prints it above the display; what goes to stdout (another console, the same terminal) first
stops the display and ends its line (:class:`Ending`). Stopping a display ends its line too: a
finished bar stays as the transfer's last word, a spinner goes.
"""

from __future__ import annotations

import time

from rich.filesize import decimal
from rich.markup import escape

from tfgpu.console import Stream, shown
from tfgpu.progress import Reporter

PLAIN_EVERY = 10.0
"""Seconds between two plain lines of one transfer (a log or a pipe reads one line per transfer
per this many seconds, never a flood)."""


class Ending(Stream):
    """A stream whose every print first stops the live display, if one runs (see the module)."""

    def print(self, *objects, **options) -> None:
        if ConsoleReporter.active is not None:
            ConsoleReporter.active.stop_live()
        super().print(*objects, **options)


out = Ending()
err = Stream(stderr=True)


def clock_text(seconds: float) -> str:
    """``1:05`` or ``1:02:05``."""
    seconds = int(max(seconds, 0))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02}:{rest % 60:02}" if hours else f"{rest // 60}:{rest % 60:02}"


def plain_line(label: str, done: int, total: int | None, seconds: float, rate: float, *, end: bool) -> str:
    """``PyPI wheels: 1.2 GB of 3.4 GB (35%), 48.0 MB/s, 0:45 left`` (``end``: how long it took)."""
    if total:
        text = f"{label}: {decimal(done)} of {decimal(total)} ({100 * done // total}%)"
    else:
        text = f"{label}: {decimal(done)}{'' if end else ' so far'}"
    if rate > 0:
        text += f", {decimal(int(rate))}/s"
    if end:
        return text + f" in {clock_text(seconds)}"
    if total and rate > 0 and done < total:
        text += f", {clock_text((total - done) / rate)} left"
    return text


_IN_PLACE = {"redirect_stdout": False, "redirect_stderr": False, "refresh_per_second": 10}
"""rich's live displays leave ``sys.stdout``/``sys.stderr`` alone: redirected, stdout's lines would
go to stderr, and a print to stderr would reach a new console on rich's proxy that does not know
where the display's line is (a note glued to the end of the bar). Prints go through the display's
own console instead (``err``), or stop it first (``out``)."""


class _Plain:
    """One transfer as plain lines: when it began, what was said last."""

    def __init__(self, now: float, done: int) -> None:
        self.began, self.first, self.said_at = now, done, now
        self.done, self.total, self.said, self.ended = done, None, -1, False


class ConsoleReporter(Reporter):
    """Progress of a long run on stderr (stdout stays clean for --json). ``clock``: seconds, for
    the plain lines' pace and rate (tests give a fake one)."""

    active: ConsoleReporter | None = None
    """The reporter whose display may be live (stdout's prints stop it first)."""

    def __init__(self, clock=time.monotonic) -> None:
        self._clock = clock
        self._status = None
        self._spinner = None
        self._bars = None
        self._finished: dict[str, tuple] = {}
        self._tasks: dict[str, int] = {}
        self._plain: dict[str, _Plain] = {}
        self._title = ""
        ConsoleReporter.active = self

    def stop_live(self) -> None:
        """Stop the spinner and the bars (a bar's final state stays, on a line of its own), and say
        the last word of every plain transfer that has not had it."""
        for live in (self._status, self._bars):
            if live is not None:
                try:
                    live.stop()
                except Exception:  # noqa: BLE001 - a Ctrl-C inside rich's live display must not mask the outcome
                    pass
        self._status, self._bars, self._tasks = None, None, {}
        for label, state in self._plain.items():
            if not state.ended and state.said != state.done:
                self._say(label, state, end=True)
        self._plain = {}

    def step(self, index: int, total: int, title: str) -> None:
        self.stop_live()
        self._title = f"[{index}/{total}] {title}"
        err.print(f"[bold]{escape(self._title)}[/]")
        self._finished = {}
        self._spin()

    def _spin(self) -> None:
        """The spinner, on a terminal: the step is at work."""
        if not err.plain:
            from rich.live import Live
            from rich.spinner import Spinner

            self._spinner = Spinner("dots", text=escape(self._title), style="status.spinner")
            self._status = Live(self._spinner, console=err.console(), transient=True, **_IN_PLACE)
            self._status.start()

    def output(self, line: str) -> None:
        if self._status is not None and line.strip():
            # A child's line (uv's, on a pseudo-terminal: what a package's metadata says) is untrusted text.
            self._spinner.update(text=f"{escape(self._title)} [dim]— {escape(shown(line.strip()[:100]))}[/]")

    def transfer(self, label: str, done: int, total: int | None) -> None:
        if err.plain:
            self._plain_transfer(label, done, total)
        else:
            self._bar(label, done, total)

    def _bar(self, label: str, done: int, total: int | None) -> None:
        if self._finished.get(label) == (done, total):
            return  # its bar is complete and printed; a repeat of its end is no news
        if self._status is not None:  # the bar says more than the spinner; the title stays above
            self._status.stop()
            self._status = None
        if self._bars is None:
            from rich.progress import (
                BarColumn,
                DownloadColumn,
                Progress,
                TextColumn,
                TimeRemainingColumn,
                TransferSpeedColumn,
            )

            self._bars = Progress(
                TextColumn("  {task.description}"),
                BarColumn(),
                DownloadColumn(),
                TransferSpeedColumn(),
                TimeRemainingColumn(),
                console=err.console(),
                **_IN_PLACE,
            )
            self._bars.start()
        if label not in self._tasks:
            self._tasks[label] = self._bars.add_task(escape(label), total=total)
        self._bars.update(self._tasks[label], completed=done, total=total)
        if total and done >= total:
            self._finished[label] = (done, total)
        if all(name in self._finished for name in self._tasks):
            # Every transfer is complete; the step goes on (installing, compiling): its bars stay
            # printed as they ended, and the spinner says it is still at work.
            self._bars.stop()
            self._bars, self._tasks = None, {}
            self._spin()

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

    def _say(self, label: str, state: _Plain, *, end: bool) -> None:
        now = self._clock()
        seconds = now - state.began
        rate = (state.done - state.first) / seconds if seconds > 0 else 0.0
        err.print(f"  {escape(plain_line(label, state.done, state.total, seconds, rate, end=end))}")
        state.said_at, state.said, state.ended = now, state.done, end

    def done(self, index: int, total: int, title: str, seconds: float) -> None:
        self.stop_live()
        if seconds >= 1:
            err.print(f"  [dim]done in {seconds:.1f} s[/]")

    def note(self, message: str) -> None:
        err.print(f"  [cyan]→[/] {escape(message)}")

    def close(self) -> None:
        self.stop_live()
        if ConsoleReporter.active is self:
            ConsoleReporter.active = None
