"""How long work reports progress: the core calls a :class:`Reporter`; the CLI renders it.

Library code never prints. A ``Reporter`` has no-op hooks, so code may always call it; the
console reporter in ``tfgpu.cli.render.results`` subclasses it, tests use :class:`RecordingReporter`.
"""

from __future__ import annotations


class Reporter:
    """No-op hooks; subclasses render (the CLI) or record (tests)."""

    def step(self, index: int, total: int, title: str) -> None:
        """A step starts."""

    def output(self, line: str) -> None:
        """A line of a running command's output (uv's download and install progress)."""

    def done(self, index: int, total: int, title: str, seconds: float) -> None:
        """A step finished."""

    def note(self, message: str) -> None:
        """A fact worth showing: an exact version chosen, a managed interpreter used."""

    def transfer(self, label: str, done: int, total: int | None) -> None:
        """Bytes moving: ``done`` of ``total`` bytes (None: not known) of the transfer ``label`` (a
        file's name, "PyPI wheels"). Called again and again with growing ``done``; the last call of
        a finished transfer has ``done == total``. Renderers throttle; callers need not."""

    def close(self) -> None:
        """The operation is over (stop any live display)."""


class RecordingReporter(Reporter):
    """Keeps every event, for tests."""

    def __init__(self) -> None:
        self.events: list[tuple] = []

    def step(self, index, total, title):
        self.events.append(("step", index, total, title))

    def output(self, line):
        self.events.append(("output", line))

    def done(self, index, total, title, seconds):
        self.events.append(("done", index, total, title))

    def note(self, message):
        self.events.append(("note", message))

    def transfer(self, label, done, total):
        self.events.append(("transfer", label, done, total))

    def transfers(self, label: str | None = None) -> list[tuple[int, int | None]]:
        """``(done, total)`` of every transfer event (of ``label`` only, when given)."""
        return [(e[2], e[3]) for e in self.events if e[0] == "transfer" and label in (None, e[1])]

    def notes(self) -> list[str]:
        return [event[1] for event in self.events if event[0] == "note"]


class Combined(Reporter):
    """Many files shown as one transfer: ``label`` over ``total`` bytes, each file's bytes added to
    those of the files before it (``bundle``: one bar for every wheel, not one per file). Notes
    become output (see :meth:`note`); every other event goes to ``reporter`` as it is."""

    def __init__(self, reporter: Reporter, label: str, total: int | None) -> None:
        self.reporter, self.label, self.total = reporter, label, total or None
        self.finished = 0
        """Bytes of the files already complete."""
        self._current = 0

    def transfer(self, label, done, total):
        self._current = done
        self.reporter.transfer(self.label, self.finished + done, self.total)

    def next_file(self, size: int) -> None:
        """The current file is complete at ``size`` bytes (whether it was fetched or already here)."""
        self.finished += size or self._current
        self._current = 0
        self.reporter.transfer(self.label, self.finished, self.total)

    def step(self, index, total, title):
        self.reporter.step(index, total, title)

    def output(self, line):
        self.reporter.output(line)

    def done(self, index, total, title, seconds):
        self.reporter.done(index, total, title, seconds)

    def note(self, message):
        # Each file's own facts ("downloaded, sha256 verified") would be a line per file again:
        # they become the live detail, and the caller says what the whole came to.
        self.reporter.output(message)

    def close(self):
        self.reporter.close()
