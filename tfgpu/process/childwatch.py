"""What the child-process door (``tfgpu.process.runner``) keeps an eye on while uv runs: its downloads' pace,
and the half-written entries it leaves in its cache when it is stopped.

* :class:`Floor`: uv gives up on a connection that goes silent (``UV_HTTP_TIMEOUT``, set by
  ``tfgpu.process.childenv``), but not on one that trickles: an index sending a byte every quarter of a
  second keeps uv waiting for ever. The tool's own downloads give up below ``MIN_RATE``
  (``tfgpu.engines.download``); uv's are held to the same floor by watching what uv and its own
  children read and write (``/proc/PID/io``: sockets, cache and env files alike), over a window
  long enough for the quiet moments of a healthy install (linking from the cache, a resolution
  between two pages). Where ``/proc`` cannot tell (another OS, a hardened kernel), only uv's own
  timeout applies.
* :class:`Scratch`: uv writes into its cache through temporary entries named ``.tmp*`` at the
  cache's root and renames each when it is complete; stopped, it leaves them (hundreds of MB of
  partial wheels). The entries that appeared during a stopped run are removed once uv has ended;
  those that were there before it started belong to someone else and stay, and so does one that
  another process still has open (the user's own uv sharing the cache, started meanwhile).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from tfgpu.doors import trees, untrusted

MIN_RATE = 32 << 10
"""Bytes per second: the tool's own downloads' floor (``tfgpu.engines.download.MIN_RATE``, held equal by a test)."""
MAX_SECONDS = 6 * 3600.0
"""The longest a download may take (``tfgpu.engines.download.MAX_SECONDS``, likewise)."""

WINDOW = 90.0
"""Seconds over which uv's reads and writes must reach ``MIN_RATE`` on average (``TFGPU_STALL_SECONDS``)."""
SAMPLE = 2.0
"""Seconds between two looks at ``/proc``."""
DOWNLOADING = (("pip", "install"), ("pip", "compile"), ("pip", "sync"), ("pip", "download"), ("venv",))
"""uv's commands that may download (and read nothing else for long): the floor is theirs."""


def _uv(argv: Sequence[str]) -> bool:
    return bool(argv) and os.path.basename(argv[0]) in ("uv", "uv.exe")


def downloads(argv: Sequence[str]) -> bool:
    """Whether ``argv`` is a uv command that fetches packages."""
    if not _uv(argv):
        return False
    words = [a for a in argv[1:3] if not a.startswith("-")]
    return any(tuple(words[: len(command)]) == command for command in DOWNLOADING)


def cache_of(argv: Sequence[str]) -> Path | None:
    """The cache a uv command names (the tool always names it: ``--cache-dir DIR``)."""
    if not _uv(argv):
        return None
    for index, arg in enumerate(argv[:-1]):
        if arg == "--cache-dir":
            return Path(argv[index + 1])
    for arg in argv:
        if arg.startswith("--cache-dir="):
            return Path(arg.split("=", 1)[1])
    return None


class Scratch:
    """The ``.tmp*`` entries at the root of a uv command's cache, as they were before it started."""

    def __init__(self, cache: Path | None) -> None:
        self.cache = cache
        self.before = self._entries() if cache is not None else set()

    @classmethod
    def of(cls, argv: Sequence[str]) -> Scratch:
        return cls(cache_of(argv))

    def _entries(self) -> set[str]:
        try:
            with os.scandir(self.cache) as found:
                return {entry.name for entry in found if entry.name.startswith(".tmp")}
        except OSError:
            return set()

    def sweep(self, log: Callable[[str], None] | None = None) -> list[Path]:
        """Remove the ``.tmp*`` entries that appeared since; call only once the child has ended."""
        if self.cache is None:
            return []
        removed = []
        fresh = sorted(self._entries() - self.before)
        busy = _open_elsewhere([self.cache / name for name in fresh]) if fresh else set()
        for name in fresh:
            path = self.cache / name
            if path in busy:
                continue
            with contextlib.suppress(OSError):
                trees.delete(path)  # a link as the link; a directory at any depth, without recursion
                removed.append(path)
        if removed and log is not None:
            log(f"removed what the stopped uv left half-written in its cache: {', '.join(map(str, removed))}")
        self.before |= {p.name for p in removed}
        return removed


def _open_elsewhere(paths: list[Path]) -> set[Path]:
    """Those of ``paths`` that a live process other than this one holds open, or works in (an
    open file or the working directory below the path): another uv is still writing there."""
    prefixes = {str(path): path for path in paths}
    busy: set[Path] = set()
    me = str(os.getpid())
    try:
        pids = [name for name in os.listdir("/proc") if name.isdigit() and name != me]
    except OSError:
        return busy
    for pid in pids:
        links = []
        with contextlib.suppress(OSError):
            links.append(os.readlink(f"/proc/{pid}/cwd"))
        with contextlib.suppress(OSError):
            for fd in os.listdir(f"/proc/{pid}/fd"):
                with contextlib.suppress(OSError):
                    links.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
        for link in links:
            for text, path in prefixes.items():
                if link == text or link.startswith(text + "/"):
                    busy.add(path)
    return busy


def _proc_text(path: str) -> str:
    """A small /proc file's text (through the reading door, bounded); OSError when it cannot be read."""
    try:
        return untrusted.read_head(path, untrusted.SYSTEM_FILE, 1 << 16).decode("ascii", "replace")
    except untrusted.Unreadable as error:
        raise OSError(str(error)) from None


def _io(pid: int) -> int | None:
    """Bytes read and written by ``pid`` and every process below it; None when /proc cannot say."""
    total, seen, todo = 0, set(), [pid]
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        try:
            fields = dict(line.split(":", 1) for line in _proc_text(f"/proc/{current}/io").splitlines() if ":" in line)
            total += int(fields["rchar"]) + int(fields["wchar"])
        except (OSError, KeyError, ValueError):
            if current == pid:
                return None
            continue
        with contextlib.suppress(OSError, ValueError):
            for task in os.listdir(f"/proc/{current}/task"):
                todo.extend(int(child) for child in _proc_text(f"/proc/{current}/task/{task}/children").split())
    return total


class Floor:
    """A watch on a running uv: ``stop(child)`` once its reads and writes stay below ``MIN_RATE``
    over ``WINDOW`` seconds, or it has run ``MAX_SECONDS``; ``reason`` then says which."""

    def __init__(self, child, stop: Callable, window: float = WINDOW, sample: float = SAMPLE) -> None:
        self.child, self._stop, self.window, self.sample = child, stop, window, sample
        self.reason = ""
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="tfgpu-uv-floor", daemon=True)

    @classmethod
    def start(cls, argv: Sequence[str], child, stop: Callable) -> Floor | None:
        """A started watch for ``argv`` when it is a uv command that downloads, else None."""
        if not downloads(argv) or _io(child.pid) is None:
            return None
        try:
            window = max(1.0, float(os.environ.get("TFGPU_STALL_SECONDS") or WINDOW))
        except ValueError:
            window = WINDOW
        watch = cls(child, stop, window=window, sample=min(SAMPLE, window / 4))
        watch._thread.start()
        return watch

    def cancel(self) -> None:
        self._done.set()

    def _watch(self) -> None:
        began = time.monotonic()
        history: list[tuple[float, int]] = []
        while not self._done.wait(self.sample):
            now, moved = time.monotonic(), _io(self.child.pid)
            if moved is None:
                return  # it ended
            history.append((now, moved))
            while len(history) > 1 and now - history[1][0] >= self.window:
                history.pop(0)
            then, before = history[0]
            if now - then >= self.window and moved - before < MIN_RATE * (now - then):
                self.reason = (
                    f"uv's downloads stalled: it read and wrote {moved - before} bytes in {now - then:.0f} s "
                    f"(less than {MIN_RATE // 1024} KiB/s)"
                )
            elif now - began > MAX_SECONDS:
                self.reason = f"uv ran longer than {MAX_SECONDS / 3600:.0f} h"
            if self.reason:
                self._stop(self.child)
                return
