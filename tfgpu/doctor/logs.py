"""Match a TensorFlow log or traceback against known failure signatures.

The signatures live in ``tfgpu/data/log_signatures.toml``: one regex per known failure, with its
cause, fix and sources. ``match_log`` returns one ``LogMatch`` per signature found, most severe
first. The regex engine scans the whole text once per signature and Python code runs only for the
lines that match, so a log of tens of megabytes takes about a second; odd input never raises:
binary junk, NUL bytes, bare carriage returns or one enormous line are just text.
"""

from __future__ import annotations

import re

from tfgpu.data import derived
from tfgpu.doors import untrusted
from tfgpu.records import as_dict, record
from tfgpu.resolver.tables import load_toml

SEVERITIES = ("fail", "warn", "info")
_MAX_LINE = 1000  # characters of the matched line kept (a progress bar can make a 20 MB "line")
_MAX_VALUE = 200  # characters of a captured group put into cause / fix
_PLACEHOLDER = re.compile(r"\{(\w+)\}")


@record
class Signature:
    """One row of ``log_signatures.toml``, its pattern compiled."""

    id: str
    title: str
    pattern: re.Pattern[str]
    severity: str
    cause: str
    fix: str
    source: tuple[str, ...]
    example: str
    shadows: tuple[str, ...] = ()
    """More generic signatures this one replaces on the lines it matches."""


@record
class LogMatch:
    """A signature found in a log: where it first appears, how often, and what to do about it."""

    id: str
    title: str
    severity: str
    cause: str
    """The signature's cause, placeholders filled from the first matching line."""
    fix: str
    line: str
    """The first matching line (truncated to 1,000 characters)."""
    line_number: int
    """1-based number of that line."""
    count: int
    """How many lines matched."""
    source: tuple[str, ...]

    def to_dict(self) -> dict:
        data = as_dict(self)
        data["source"] = list(self.source)
        return data


@derived
def signatures() -> tuple[Signature, ...]:
    """Every known signature, in table order, patterns compiled once.

    What holds a runaway pattern off is ``tfgpu.data.checks.pattern_problem`` (no repeat inside a repeat, a
    length cap): the schema refuses such a pattern in any table, and it is checked again here
    because the parsed-data cache is checked for types only. Lines are not cut before matching:
    ``^(a+)+$`` backtracks for minutes on a 41-byte line, so no cut would hold it."""
    # Start-up cost: `doctor` loads this module but not tfgpu.data.checks.
    from tfgpu.data.checks import pattern_problem

    return tuple(
        Signature(
            id=row["id"],
            title=row["title"],
            pattern=re.compile(row["pattern"]),
            severity=row["severity"],
            cause=row["cause"],
            fix=row["fix"],
            source=tuple(row.get("source", ())),
            example=row.get("example", ""),
            shadows=tuple(row.get("shadows", ())),
        )
        for row in load_toml("log_signatures.toml")["signature"]
        if pattern_problem(row["pattern"]) is None
    )


LOG_LIMIT = 32 << 20
"""Bytes of a log that ``doctor --log`` reads (a log can be endless: ``--log /dev/zero``, a pipe)."""


def read_log(source: str, stdin=None) -> tuple[str, bool]:
    """A log's text (``-``: stdin) and whether it was cut at :data:`LOG_LIMIT`; undecodable bytes
    become replacement characters. An unreadable file is ``bad-log-file`` (exit 2)."""

    if source == "-":
        stream = stdin if stdin is not None else __import__("sys").stdin.buffer
        data = untrusted.read_stream(stream, untrusted.LOG, LOG_LIMIT + 1)
    else:
        data = untrusted.read_head(source, untrusted.LOG, LOG_LIMIT + 1)
    return data[:LOG_LIMIT].decode("utf-8", errors="replace"), len(data) > LOG_LIMIT


def match_log(text: str | bytes) -> list[LogMatch]:
    """The known failures in ``text``: one match per signature, ordered fail, warn, info, then by line.

    ``text`` is the whole log; bytes are decoded as UTF-8 with undecodable bytes replaced.
    """
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("utf-8", errors="replace")
    if "\r" in text:  # Windows line ends, and progress bars redrawn with a bare carriage return
        text = text.replace("\r\n", "\n").replace("\r", "\n")

    table = signatures()
    hits = {sig.id: _matching_lines(sig.pattern, text) for sig in table}
    kept = dict(hits)
    for sig in table:
        if sig.shadows and hits[sig.id]:
            covered = set(hits[sig.id])
            for other in sig.shadows:
                if kept.get(other):
                    kept[other] = [start for start in kept[other] if start not in covered]

    found = [sig for sig in table if kept[sig.id]]
    numbers = _line_numbers(text, sorted({kept[sig.id][0] for sig in found}))
    matches = []
    for sig in found:
        start = kept[sig.id][0]
        end = text.find("\n", start)
        line = text[start : end if end >= 0 else len(text)]
        first = sig.pattern.search(text, start)
        groups = first.groupdict() if first else {}
        matches.append(
            LogMatch(
                id=sig.id,
                title=sig.title,
                severity=sig.severity,
                cause=_fill(sig.cause, groups),
                fix=_fill(sig.fix, groups),
                line=line[:_MAX_LINE].rstrip(),
                line_number=numbers[start],
                count=len(kept[sig.id]),
                source=sig.source,
            )
        )
    rank = {severity: i for i, severity in enumerate(SEVERITIES)}
    matches.sort(key=lambda m: (rank.get(m.severity, len(rank)), m.line_number, m.id))
    return matches


def _matching_lines(pattern: re.Pattern[str], text: str) -> list[int]:
    """Start offsets of the lines ``pattern`` matches, in order, each line once."""
    starts = []
    pos = 0
    while (found := pattern.search(text, pos)) is not None:
        start = text.rfind("\n", 0, found.start()) + 1
        starts.append(start)
        end = text.find("\n", found.start())
        if end < 0:
            break
        pos = end + 1
    return starts


def _line_numbers(text: str, offsets: list[int]) -> dict[int, int]:
    """1-based line number of each offset (sorted ascending), counting newlines once in total."""
    numbers = {}
    line, previous = 1, 0
    for offset in offsets:
        line += text.count("\n", previous, offset)
        numbers[offset] = line
        previous = offset
    return numbers


def _fill(template: str, groups: dict[str, str | None]) -> str:
    """``template`` with each ``{name}`` replaced by the captured group ``name``."""

    def value(placeholder: re.Match[str]) -> str:
        name = placeholder.group(1)
        if name not in groups:
            return placeholder.group(0)
        captured = groups[name]
        return "?" if captured is None else captured[:_MAX_VALUE]

    return _PLACEHOLDER.sub(value, template)
