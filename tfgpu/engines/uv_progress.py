"""How far uv's downloads have come, read from the bars uv draws on a terminal.

Why this way: uv knows every wheel's size and counts its bytes as they arrive, but shows them only
on a terminal (a bar per download: the package, bytes so far, its size); on a pipe it prints one
line per large wheel ("Downloading tensorflow (620.1MiB)") when it starts and one when it is done,
and nothing in between. The other ways to learn the numbers are worse: uv's cache directory grows
by unpacked files (a wheel is unzipped as it streams), not by bytes transferred, and by whatever
else shares the cache; ``uv -v`` logs requests, not bytes; the index's metadata gives sizes but no
bytes so far. So an install runs on a pseudo-terminal (``tfgpu.proc.Runner.run``'s ``screen``) and
this module reads uv's own bars: the numbers are uv's. If a uv release draws them differently,
nothing matches and there are no numbers (the step's spinner and uv's printed lines, as before),
never wrong ones.

The total is the sum of the sizes of the downloads uv draws. It is said once every download is
drawn: uv's header counts the packages it prepares (``Preparing packages... (3/7)``), a bar is drawn
for each package under way (uv draws no more bars than its terminal has lines:
``tfgpu.pseudoterminal.LINES``) and goes when its download is in. While fewer bars are drawn than
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
    r"(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)\s+-{3,}\s+"
    r"(?P<done>\d+(?:\.\d+)?) ?(?P<done_unit>[KMGT]?i?B)/(?P<total>\d+(?:\.\d+)?) ?(?P<total_unit>[KMGT]?i?B)"
)
_COUNT = re.compile(r"\((?P<prepared>\d+)/(?P<count>\d+)\)")
"""The header's ``(prepared/packages)``."""
_PREPARED = re.compile(r"Prepared \d+ packages? in")
"""The line uv prints once every download is in (its bars then give way to the install's)."""
_UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40, "kB": 1000, "KB": 1000}
_MAX_BUFFER = 1 << 20


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
        self._said: tuple[int, int | None] | None = None
        self._whole = True
        """Every download is among those seen (so the sum of their sizes is the total)."""
        self._all_drawn: int | None = None
        """The package count of the header under which every package left was drawn at once."""

    def feed(self, text: str) -> None:
        """More of what uv drew. Only whole redraws are read (the last may still be arriving),
        until uv says every download is in."""
        self._buffer += text
        prepared = _PREPARED.search(_ESCAPES.sub("", self._buffer)) is not None
        last = self._buffer.rfind(_HEADER)
        if prepared or (last <= 0 and len(self._buffer) >= _MAX_BUFFER):
            complete, self._buffer = self._buffer, ""
        elif last > 0:
            complete, self._buffer = self._buffer[:last], self._buffer[last:]
        else:
            return
        frames = _ESCAPES.sub("", complete).split(_HEADER)
        for frame in frames[1:] if len(frames) > 1 else frames:
            self._frame(frame, whole=len(frames) > 1)
        if prepared:
            self.finish()
        else:
            self._report()

    def _frame(self, frame: str, *, whole: bool) -> None:
        drawn = set()
        count = _COUNT.match(frame.lstrip())
        for bar in _BAR.finditer(frame):
            name = bar["name"]
            drawn.add(name)
            total = size(bar["total"], bar["total_unit"])
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
