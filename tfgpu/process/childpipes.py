"""A short probe's stdout and stderr, read within bounds of memory and time.

Why this way: ``Popen.communicate`` keeps everything a child writes and waits for the end of its
pipes, not for the child. A probe runs programs the env holds (a framework's import, a library
load), and an env's code is the env's to craft: one that prints gigabytes filled the tool's memory
(400 MB printed cost 1.6 GB), and one that leaves a process of its own holding the pipes open
(a daemon forked at import) made a child that had exited 0 read as stopped at its timeout, its
printed answers lost. Here each stream keeps its first and last :data:`KEPT` bytes (the answers a
probe prints come first or last; what lies between is said to be left out), and once the child has
exited its pipes are read for :data:`GRACE` seconds more, not until whoever else holds them closes
them.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import threading
import time

KEPT = 4 << 20
"""Bytes kept of each end of a stream (a probe's JSON answers are a few KiB)."""
GRACE = 2.0
"""Seconds a pipe is read after the child exited: what it wrote is in the pipe by then; another
process still holding it open is not the child."""


class Kept:
    """One stream's first and last :data:`KEPT` bytes, and how many were left out between."""

    def __init__(self, kept: int = KEPT) -> None:
        self.kept, self.head, self.tail, self.dropped = kept, bytearray(), bytearray(), 0

    def add(self, data: bytes) -> None:
        room = self.kept - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data
            if len(self.tail) > self.kept:
                cut = len(self.tail) - self.kept
                self.dropped += cut
                del self.tail[:cut]

    def text(self, errors: str) -> str:
        middle = f"\n[{self.dropped:,} bytes left out]\n".encode() if self.dropped else b""
        text = bytes(self.head + middle + self.tail).decode("utf-8", errors)
        return text.replace("\r\n", "\n").replace("\r", "\n")  # as Popen's text mode gave them


def _feed(stream, data: bytes) -> None:
    with contextlib.suppress(OSError, ValueError):  # a child that exits without reading its input
        stream.write(data)
    with contextlib.suppress(OSError, ValueError):
        stream.close()


def collect(child, input: str | None, timeout: float, kill) -> tuple[Kept, Kept, bool]:
    """(stdout, stderr, whether ``timeout`` passed) of ``child``, a Popen with binary pipes for both
    (and for stdin when ``input`` is given); ``kill(child)`` stops it (and what it started) at the
    timeout. Returns once the child has exited and its pipes ended or :data:`GRACE` passed."""
    if input is not None:
        # The feeding thread owns stdin from here (Popen no longer closes it): a process the child left
        # holding its stdin unread would block that write, and Popen's close of the same stream would
        # wait on it for ever.
        stream, child.stdin = child.stdin, None
        threading.Thread(target=_feed, args=(stream, input.encode("utf-8")), daemon=True).start()
    kept = {child.stdout.fileno(): Kept(), child.stderr.fileno(): Kept()}
    out, err = kept[child.stdout.fileno()], kept[child.stderr.fileno()]
    deadline, timed_out, exited_at = time.monotonic() + timeout, False, None
    with selectors.DefaultSelector() as selector:
        for stream in (child.stdout, child.stderr):
            selector.register(stream.fileno(), selectors.EVENT_READ)
        while selector.get_map():
            now = time.monotonic()
            if exited_at is None and child.poll() is not None:
                exited_at = now
            if exited_at is not None and now >= exited_at + GRACE:
                break  # another process holds the pipes open: it is not the child
            if exited_at is None and now >= deadline:
                timed_out = True
                kill(child)
                exited_at = now  # what is in the pipes is read for the grace, as after an exit
                continue
            limit = (exited_at + GRACE if exited_at is not None else min(deadline, now + 0.2)) - now
            for key, _ in selector.select(max(0.0, limit)):
                try:
                    data = os.read(key.fd, 1 << 16)
                except OSError:
                    data = b""
                if data:
                    kept[key.fd].add(data)
                else:
                    selector.unregister(key.fd)
    if child.poll() is None and not timed_out:  # it closed both pipes but runs on: its timeout still holds
        # Short steps first, as Popen.wait's own timeout does: a child that closes its pipes as it exits
        # (every one does) is there to reap a moment later, and a first step of 50 ms made each probe
        # 50 ms slower.
        step = 0.0005
        while child.poll() is None and time.monotonic() < deadline:
            time.sleep(step)
            step = min(step * 2, 0.05)
        if child.poll() is None:
            timed_out = True
            kill(child)
    child.wait()
    return out, err, timed_out
