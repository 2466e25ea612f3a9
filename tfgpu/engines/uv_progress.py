"""How far uv's downloads have come, read from the bars uv draws on a terminal.

Why this way: uv knows every wheel's size and counts its bytes as they arrive, but shows them only
on a terminal (a bar per download: the package, bytes so far, its size); on a pipe it prints one
line per large wheel ("Downloading tensorflow (620.1MiB)") when it starts and one when it is done,
and nothing in between. The other ways to learn the numbers are worse: uv's cache directory grows
by unpacked files (a wheel is unzipped as it streams), not by bytes transferred, and by whatever
else shares the cache; ``uv -v`` logs requests, not bytes; the index's metadata gives sizes but no
bytes so far. So an install runs on a pseudo-terminal (``tfgpu.process.runner.Runner.run``'s ``screen``) and
this module reads uv's own bars: the numbers are uv's. If a uv release draws them differently,
nothing matches and there are no numbers (the step's spinner and uv's printed lines, as before),
never wrong ones.

The total is the sum of the sizes of the downloads uv draws. It is said once every download is
drawn: uv's header counts the packages it prepares (``Preparing packages... (3/7)``), a bar is drawn
for each package under way (uv draws no more bars than its terminal has lines:
``tfgpu.process.pseudoterminal.LINES``) and goes when its download is in. While fewer bars are drawn than
packages remain unprepared, uv has packages it has not started (it runs up to 50 downloads at once),
and the sum would be a part that grows: the bytes are reported with no total (the bar says the
total is not known), never a total that is not the download's. Once as many bars are drawn as
packages remain, every package to come is among them, and the total stays whole (a download that
is in but not yet unpacked is neither drawn nor counted as prepared for a moment: that is no new
package). A TensorFlow install's total is whole within a second.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

LABEL = "PyPI wheels"
"""The transfer's name on the tool's bar."""

_ESCAPES = re.compile(r"\x1b(\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)?|[@-Z\\-_])")
_HEADER = "Preparing packages..."
"""The first line of every redraw of uv's download bars (with "(k/N)" after it)."""
_BAR = re.compile(
    r"(?<![A-Za-z0-9._-])(?P<name>[A-Za-z0-9][A-Za-z0-9._-]{0,200})\s{1,100}-{3,400}\s{1,100}"
    r"(?P<done>[0-9]{1,15}(?:\.[0-9]{1,6})?) ?(?P<done_unit>[KMGT]?i?B)/"
    r"(?P<total>[0-9]{1,15}(?:\.[0-9]{1,6})?) ?(?P<total_unit>[KMGT]?i?B)"
)
"""One download's bar. A match starts only where a name does (the look-behind) and every part has a
length cap, so a line of a million name characters, spaces or dashes is read in linear time: without
them each position of such a run began a scan to its end (quadratic: minutes for a 1 MB line).
Numbers are ASCII digits only (``\\d`` takes any script's: ``١٢ MiB`` is no bar uv draws)."""
MOST_BYTES = 1 << 40
"""The largest download read from a bar: no wheel an index serves comes near a TiB, so a bar that
claims more (``99999999999999 GiB``) is no download's and is not read; the total then stays
unknown (a package drawn without its bar), never a total no download has."""
_COUNT = re.compile(r"\((?P<prepared>\d{1,9})/(?P<count>\d{1,9})\)")
"""The header's ``(prepared/packages)``."""
_PREPARED = re.compile(r"Prepared \d{1,9} packages? in")
"""The line uv prints once every download is in (its bars then give way to the install's)."""
_UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40, "kB": 1000, "KB": 1000}
_MAX_BUFFER = 1 << 20
LINE_LIMIT = 1 << 16
"""The most of one drawn line read for bars: a bar is about a hundred characters, and a redraw that
moves the cursor instead of starting lines puts its fifty bars on one."""
_OVERLAP = 64
"""What is searched again of the text read before, for a header or "Prepared" split across reads."""


def draws_progress(argv) -> bool:
    """Whether ``argv`` is a uv command that downloads wheels and draws bars for it on a terminal."""
    if sys.platform == "win32":  # no pseudo-terminal to give it: uv's printed lines only
        return False
    argv = [str(a) for a in argv]
    return len(argv) > 2 and Path(argv[0]).name in ("uv", "uv.exe") and argv[1:3] in (["pip", "install"], ["sync"])


def size(number: str, unit: str) -> int:
    """Bytes of uv's ``16.13 MiB`` (binary units, two decimals)."""
    return int(float(number) * _UNITS.get(unit, 1))


class UvProgress:
    """Reads what uv draws (:meth:`feed`) and reports the downloads' bytes to ``reporter``."""

    def __init__(self, reporter, label: str = LABEL) -> None:
        self.reporter, self.label = reporter, label
        self.downloads: dict[str, tuple[int, int]] = {}
        """Every download seen: ``(bytes so far, size)``; a finished one has both equal."""
        self._buffer = ""
        """What uv drew since the last whole redraw, escape sequences out."""
        self._raw = ""
        """The start of an escape sequence still arriving (a few characters at most)."""
        self._prepared = False
        self._said: tuple[int, int | None] | None = None
        self._whole = True
        """Every download is among those seen (so the sum of their sizes is the total)."""
        self._all_drawn: int | None = None
        """The package count of the header under which every package left was drawn at once."""

    def feed(self, text: str) -> None:
        """More of what uv drew. Only whole redraws are read (the last may still be arriving),
        until uv says every download is in. Each character is searched a bounded number of times
        (what arrived, plus :data:`_OVERLAP` of what came before), so a reader fed 10 MB costs time
        in proportion to 10 MB."""
        raw, self._raw = self._raw + text, ""
        escape = raw.rfind("\x1b", max(0, len(raw) - _OVERLAP))
        if escape >= 0:
            whole = _ESCAPES.match(raw, escape)
            if whole is None or whole.end() == len(raw):  # may go on in the next read
                raw, self._raw = raw[:escape], raw[escape:]
        seen = len(self._buffer)
        self._buffer += _ESCAPES.sub("", raw)
        if not self._prepared:
            self._prepared = _PREPARED.search(self._buffer, max(0, seen - _OVERLAP)) is not None
        # A header at 0 starts the redraw still arriving; one after it ends that redraw.
        last = self._buffer.rfind(_HEADER, max(1, seen - len(_HEADER) + 1))
        if self._prepared or (last <= 0 and len(self._buffer) >= _MAX_BUFFER):
            complete, self._buffer = self._buffer, ""
        elif last > 0:
            complete, self._buffer = self._buffer[:last], self._buffer[last:]
        else:
            return
        frames = complete.split(_HEADER)
        for frame in frames[1:] if len(frames) > 1 else frames:
            self._frame(frame, whole=len(frames) > 1)
        if self._prepared:
            self._prepared = False
            self.finish()
        else:
            self._report()

    def _frame(self, frame: str, *, whole: bool) -> None:
        drawn = set()
        count = _COUNT.match(frame.lstrip()[:LINE_LIMIT])
        for line in frame.splitlines():
            for bar in _BAR.finditer(line[:LINE_LIMIT]):
                name, total = bar["name"], size(bar["total"], bar["total_unit"])
                if total > MOST_BYTES:
                    continue
                drawn.add(name)
                self.downloads[name] = (min(size(bar["done"], bar["done_unit"]), total), total)
        if whole:  # a download no longer drawn is complete (uv removes a bar when its wheel is in)
            for name, (done, total) in self.downloads.items():
                if name not in drawn and done != total:
                    self.downloads[name] = (total, total)
            if count is not None:
                packages = int(count["count"])
                if self._all_drawn != packages and len(drawn) >= packages - int(count["prepared"]):
                    self._all_drawn = packages
                self._whole = self._all_drawn == packages

    def finish(self) -> None:
        """uv succeeded: every download it started is complete."""
        self.downloads = {name: (total, total) for name, (_, total) in self.downloads.items()}
        self._whole = True
        self._report()

    def _report(self) -> None:
        if not self.downloads:
            return
        total = sum(total for _, total in self.downloads.values()) if self._whole else None
        now = (sum(done for done, _ in self.downloads.values()), total)
        if now != self._said:
            self._said = now
            self.reporter.transfer(self.label, *now)
