"""The live lines of a step on a terminal: the spinner line and one bar per transfer, each drawn
to fit the terminal's width. Part of the CLI layer (``tfgpu.cli.render.live`` runs them in rich's live display).

Why the tool draws its own lines instead of rich's progress table: the live display is redrawn in
place by moving the cursor up as many lines as it drew last time, so a line that the terminal wraps
(wider than itself by one cell) makes every redraw leave a copy behind. Every line here is cut to
the width less one column (a glyph that a terminal draws two cells wide still fits), and never
wraps. And the numbers are the transfer's own: the bytes and total the caller reported (uv's, pip's,
the server's), the rate over the last seconds measured here, the time left from both; a total that
is not known is said to be unknown, never guessed.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque

from rich.filesize import decimal
from rich.text import Text

from tfgpu.doors.controls import shown

RATE_WINDOW = 8.0
"""Seconds of recent progress the rate is measured over (a stall shows as a falling rate)."""
RATE_AFTER = 1.0
"""Seconds of a transfer before a rate is shown (the first second says little)."""
BAR_MOST = 40
BAR_LEAST = 10
SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"


def clock_text(seconds: float) -> str:
    """``1:05`` or ``1:02:05``."""
    seconds = int(max(seconds, 0))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02}:{rest % 60:02}" if hours else f"{rest // 60}:{rest % 60:02}"


def _unit(total: int) -> tuple[int, str]:
    for scale, suffix in ((10**12, "TB"), (10**9, "GB"), (10**6, "MB"), (10**3, "kB")):
        if total >= scale:
            return scale, suffix
    return 1, "bytes"


def of_total(done: int, total: int) -> str:
    """``22.3/58.7 MB`` (both in the total's unit)."""
    scale, suffix = _unit(total)
    if scale == 1:
        return f"{done}/{total} bytes"
    return f"{done / scale:.1f}/{total / scale:.1f} {suffix}"


class Transfer:
    """One transfer as the terminal shows it: the bytes and total last reported, and when."""

    def __init__(self, label: str, now: float) -> None:
        self.label, self.began, self.at = label, now, now
        self.shown = shown(label)
        """The label as the terminal gets it (a file's name from a URL: no control character)."""
        self.total: int | None = None
        self.done, self.first = 0, 0
        self.samples: deque[tuple[float, int]] = deque()
        self.outcome: str | None = None
        """None while it runs; "complete" or "stopped" once its last word is known."""

    def update(self, done: int, total: int | None, now: float) -> None:
        if done < self.done or not self.samples:  # the first report, or a new attempt from the start
            self.samples.clear()
            self.first = done
        self.done, self.total, self.at = done, total, now
        self.samples.append((now, done))
        while len(self.samples) > 2 and self.samples[1][0] <= now - RATE_WINDOW:
            self.samples.popleft()

    @property
    def complete(self) -> bool:
        return self.total is not None and self.done >= self.total

    def rate(self, now: float) -> float | None:
        """Bytes a second: over the last :data:`RATE_WINDOW` seconds up to ``now`` while it runs (a
        transfer that stalls slows down on the screen), over the whole transfer once it is over;
        None in its first second."""
        if self.complete or self.outcome is not None:
            since, base, now, least = self.began, self.first, self.at, 0.0
        elif self.samples:
            (since, base), least = self.samples[0], RATE_AFTER
        else:
            return None
        if now - since <= least:
            return None
        return max(self.done - base, 0) / (now - since)

    def line(self, width: int, now: float) -> Text:
        """The transfer's line, at most ``width`` cells: label, bar, bytes of the total, rate, time
        left (or how it ended)."""
        rate = self.rate(now)
        words: list[tuple[str, str]] = []
        if self.total:
            words.append((of_total(min(self.done, self.total), self.total), "green"))
        else:
            words.append((f"{decimal(self.done)} of a total not known", "green"))
        if self.outcome == "stopped":
            words.append((f"stopped after {clock_text(self.at - self.began)}", "red"))
        else:
            if rate is not None:
                words.append((f"{decimal(int(rate))}/s", "red"))
            if self.outcome == "complete" or self.complete:
                words.append((f"in {clock_text(self.at - self.began)}", "cyan"))
            elif self.total and rate:
                # Rounded up: "0:00 left" while bytes are still coming would say it is over.
                words.append((f"{clock_text(math.ceil((self.total - self.done) / rate))} left", "cyan"))
            elif self.total:
                words.append(("-:-- left", "cyan"))
        tail = Text("  ").join(Text(word, style=style) for word, style in words)
        head = Text(f"  {self.shown}")
        room = width - head.cell_len - 2 - tail.cell_len
        if self.total and room >= BAR_LEAST:
            bar = _bar(min(room, BAR_MOST), min(self.done, self.total) / self.total, self.outcome == "stopped")
            line = head + Text(" ") + bar + Text(" ") + tail
        else:  # no room for a bar: the numbers before the whole label
            if head.cell_len > width - 1 - tail.cell_len >= 6:
                head.truncate(width - 1 - tail.cell_len, overflow="ellipsis")
            line = head + Text(" ") + tail
        line.truncate(width, overflow="ellipsis")
        return line


def _bar(width: int, fraction: float, stopped: bool) -> Text:
    """Heavy for what came, light for what is to come: readable without colour too."""
    full = int(fraction * width)
    bar = Text("━" * full, style="red" if stopped else "magenta")
    if full < width:
        bar.append("─" * (width - full), style="grey37")
    return bar


class Board:
    """What the live display draws: the step's spinner line (its title and the running command's
    last line) and a line per transfer. A rich renderable; the display redraws it ten times a
    second from another thread, hence the lock."""

    def __init__(self, title: str, clock=time.monotonic) -> None:
        self.title, self.detail, self.clock = title, "", clock
        self.transfers: dict[str, Transfer] = {}
        self.lock = threading.Lock()

    def transfer(self, label: str, done: int, total: int | None) -> Transfer:
        now = self.clock()
        with self.lock:
            found = self.transfers.get(label)
            if found is None:
                found = self.transfers[label] = Transfer(label, now)
            found.update(done, total, now)
            return found

    def take(self, label: str) -> Transfer | None:
        with self.lock:
            return self.transfers.pop(label, None)

    def lines(self, width: int) -> list[Text]:
        now = self.clock()
        width = max(width - 1, 1)  # one cell spare: a glyph some terminal draws two cells wide
        with self.lock:
            spin = Text(SPINNER[int(now * 12.5) % len(SPINNER)] + " ", style="green")
            status = spin + Text(shown(self.title), style="bold")
            if self.detail:
                status += Text(" - " + self.detail, style="dim")
            status.truncate(width, overflow="ellipsis")
            return [status, *(t.line(width, now) for t in self.transfers.values())]

    def __rich_console__(self, console, options):
        lines = self.lines(options.max_width)
        for line in lines:
            line.no_wrap, line.overflow, line.end = True, "crop", "\n"
        yield from lines
