"""How long work reports progress: the installers call a Reporter; the CLI renders it."""

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
