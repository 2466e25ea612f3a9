"""How long work reports progress: the core calls a :class:`Reporter`; the CLI renders it.

Library code never prints. A ``Reporter`` has no-op hooks, so code may always call it; the
console reporter in ``tfgpu.render`` subclasses it, tests use :class:`RecordingReporter`.
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

    def notes(self) -> list[str]:
        return [event[1] for event in self.events if event[0] == "note"]
