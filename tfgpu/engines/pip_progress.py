"""How far pip's downloads have come (``--engine pip``), read from what pip prints and draws.

Why this way: pip knows every download's size and counts its bytes, but shows them only on a
terminal, as rich's bar under the file's "Downloading URL (size)" line; on a pipe it prints that
line and nothing more until the download is done. pip 24.1 and later can also print them plainly
(``--progress-bar raw``: "Progress 1048576 of 3145728" lines), but the pip a venv gets is the one
its Python bundles (``ensurepip``), often older, and an older pip refuses the option outright. So
pip runs on a pseudo-terminal (``tfgpu.process.runner.Runner.run``'s ``screen``), as uv does
(``tfgpu.engines.uv_progress``), and this module reads pip's own bar: the numbers are pip's. Raw
lines are read too, for a pip that prints them. If a pip release draws differently, nothing matches
and there are no numbers (the step's spinner and pip's printed lines), never wrong ones.

pip downloads one file at a time and says each one's size only when it starts, so each download
is a transfer of its own (the file's name, its bytes, its size): the total the tool shows is that
file's, and it is exact; a sum over the files would be a total that grows as pip goes on. Files of
40 kB or less get no bar from pip, and none here (they take no time).
"""

from __future__ import annotations

import re
import sys

from tfgpu.doors import urls  # the one place URLs are split
from tfgpu.doors.controls import character_class
from tfgpu.engines.uv_progress import MOST_BYTES

_ESCAPES = re.compile(r"\x1b(\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)?|[@-Z\\-_])")
_STARTS = re.compile(r"^\s*Downloading (?P<url>\S+)")
"""pip's line as a download starts (``Downloading https://…/x-1.0-py3-none-any.whl (3.1 MB)``)."""
_BAR = re.compile(
    r"(?<![0-9.])(?P<done>[0-9]{1,15}(?:\.[0-9]{1,6})?)/(?P<total>[0-9]{1,15}(?:\.[0-9]{1,6})?) "
    r"(?P<unit>bytes|[kMGTPE]B)\b"
)
"""rich's download column, as pip draws it: ``1.2/3.1 MB`` (decimal units, one decimal). Numbers of
ASCII digits, of bounded length: a run of digits is matched in linear time and never overflows."""
_RAW = re.compile(r"^\s*Progress (?P<done>[0-9]{1,30}) of (?P<total>[0-9]{1,30})\s*$")
"""pip's ``--progress-bar raw`` line: exact bytes."""
_UNITS = {"bytes": 1, "kB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12, "PB": 10**15, "EB": 10**18}
_MAX_PENDING = 1 << 16
LINE_LIMIT = 8192
"""The most of one line or redraw read (a "Downloading URL (size)" line is a few hundred characters)."""
_CONTROLS = re.compile(character_class())


def draws_progress(argv) -> bool:
    """Whether ``argv`` is a pip install (``PYTHON -m pip install``), which draws bars on a terminal."""
    if sys.platform == "win32":  # no pseudo-terminal to give it: pip's printed lines only
        return False
    return [str(a) for a in argv[1:4]] == ["-m", "pip", "install"]


def label_of(url: str) -> str:
    """A download's name on the tool's bar: a wheel's project and version (``tensorflow 2.21.0``),
    else the file's name."""

    try:
        name = urls.filename(url.rstrip("/"))
    except ValueError:  # pip printed something that is not a URL: show nothing of it
        name = ""
    name = _CONTROLS.sub("", name)[:80]  # a percent-encoded ESC or BEL never reaches the terminal
    if name.endswith(".whl") and name.count("-") >= 4:
        project, version = name.split("-")[:2]
        return f"{project} {version}"
    return name or "download"


class PipProgress:
    """Reads what pip prints and draws (:meth:`feed`) and reports each download's bytes to ``reporter``."""

    def __init__(self, reporter) -> None:
        self.reporter = reporter
        self.downloads: dict[str, tuple[int, int]] = {}
        """Every download that drew a bar: ``(bytes so far, size)``; a finished one has both equal."""
        self._current: str | None = None
        self._pending = ""

    def feed(self, text: str) -> None:
        """More of what pip wrote; read a line (or a redraw, up to a carriage return) at a time, at most
        :data:`LINE_LIMIT` of each: a megabyte without an end costs time in proportion, not more."""
        if "\r" not in text and "\n" not in text:
            self._pending = (self._pending + text)[-_MAX_PENDING:]
            return
        *complete, self._pending = re.split(r"[\r\n]", self._pending + text)
        self._pending = self._pending[-_MAX_PENDING:]
        for piece in complete:
            self._read(_ESCAPES.sub("", piece[:LINE_LIMIT]))

    def _read(self, line: str) -> None:
        starts = _STARTS.match(line)
        if starts:
            self._complete()
            self._current = label_of(starts["url"])
            return
        if self._current is None:
            return
        raw = _RAW.match(line)
        if raw:
            done, total = int(raw["done"]), int(raw["total"])
        else:
            bar = _BAR.search(line)
            if bar is None or "━" not in line and "-" * 3 not in line:
                return
            scale = _UNITS[bar["unit"]]
            done, total = int(float(bar["done"]) * scale), int(float(bar["total"]) * scale)
        if not 0 < total <= MOST_BYTES:  # a size no download has: no numbers rather than a false total
            return
        done = min(done, total)
        if self.downloads.get(self._current) != (done, total):
            self.downloads[self._current] = (done, total)
            self.reporter.transfer(self._current, done, total)

    def _complete(self) -> None:
        """The download under way is done (pip went on to the next one, or finished)."""
        if self._current in self.downloads:
            done, total = self.downloads[self._current]
            if done != total:
                self.downloads[self._current] = (total, total)
                self.reporter.transfer(self._current, total, total)
        self._current = None

    def finish(self) -> None:
        """pip succeeded: every download it started is complete."""
        if self._pending:
            self._read(_ESCAPES.sub("", self._pending[:LINE_LIMIT]))
            self._pending = ""
        self._complete()
