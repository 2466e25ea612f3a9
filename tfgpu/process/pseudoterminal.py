"""A child process on a pseudo-terminal, read back: what it draws, and the lines it printed.

Some programs draw their progress only on a terminal: uv shows every download's bytes and total
there, and on a pipe only a line per large wheel once it is complete. ``tfgpu.process.runner.Runner.run``
(``screen=``) starts such a child with a pseudo-terminal from here as its stdout and stderr, gives
everything drawn to a reader of progress (``tfgpu.engines.uv_progress``), and keeps, for the log
and the error messages, only what was printed (:class:`Printed`).
"""

from __future__ import annotations

import codecs
import errno
import fcntl
import os
import pty
import re
import struct
import termios
from collections.abc import Callable

from tfgpu.doors.controls import character_class

COLUMNS = 160
"""The terminal's width: wide enough that no progress line is cut short."""
LINES = 200
"""The terminal's height: tall enough that uv draws a bar for every download it runs at once (it
draws no more bars than its terminal has lines, and a download not drawn has no size to add to
the total: ``tfgpu.engines.uv_progress``)."""


def open_terminal() -> tuple[int, int]:
    """(reader, child's end) of a new pseudo-terminal, wide enough that no progress line is cut."""
    reader, child_end = pty.openpty()
    fcntl.ioctl(child_end, termios.TIOCSWINSZ, struct.pack("HHHH", LINES, COLUMNS, 0, 0))
    return reader, child_end


def read_terminal(reader: int, screen: Callable[[str], None], printed: Printed) -> None:
    """Everything the child draws, to ``screen`` and ``printed``, until it closes its terminal."""
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    try:
        while True:
            try:
                chunk = os.read(reader, 1 << 16)
            except OSError as error:  # EIO: the child's end is closed (Linux says so instead of EOF)
                if error.errno != errno.EIO:
                    raise
                chunk = b""
            text = decoder.decode(chunk, final=not chunk)
            if text:
                screen(text)
                printed.feed(text)
            if not chunk:
                break
        printed.feed("\n")
    finally:
        os.close(reader)


class Printed:
    """The lines a program printed on a terminal, from everything it drew there: a line is what
    was left after its last carriage return when the newline came (a progress bar redrawn in place
    never reaches a newline), with the escape sequences (colours, cursor moves) taken out."""

    _ESCAPES = re.compile(r"\x1b(\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)?|[ -~])")
    """CSI and OSC sequences, and every other two-character escape (``ESC c`` resets a terminal)."""
    _CONTROLS = re.compile(character_class(keep="\t\n"))
    """What is left of the controls (tfgpu.doors.controls) once the sequences are out: a lone ESC, C1's
    CSI, a bidirectional override."""
    LINE_LIMIT = 64 * 1024
    """The most of one line kept while it is drawn: a program that writes megabytes without a newline
    costs memory and time in proportion, not more (the tail is kept: a redraw ends there)."""

    def __init__(self, lines: list[str], on_line: Callable[[str], None] | None) -> None:
        self.lines, self.on_line, self.pending = lines, on_line, ""

    def feed(self, text: str) -> None:
        if "\n" not in text:
            self.pending = (self.pending + text)[-self.LINE_LIMIT :]
            return
        *complete, self.pending = (self.pending + text).split("\n")
        self.pending = self.pending[-self.LINE_LIMIT :]
        for raw in complete:
            line = self._ESCAPES.sub("", raw.rstrip("\r").rsplit("\r", 1)[-1][-self.LINE_LIMIT :])
            line = self._CONTROLS.sub("", line).rstrip()
            if not line:
                continue
            self.lines.append(line + "\n")
            if self.on_line is not None:
                self.on_line(line)
