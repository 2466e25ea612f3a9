"""Where the tool's human output goes, and how it is laid out for what is on the other end.

The output contract (docs/output.md):

* **Not a terminal** (a pipe, a file, ``| cat``, CI logs): plain text. No colour, no boxes, no
  truncation and no wrapping: every line is as long as its content, so paths, commands and URLs
  arrive whole and ``grep``/``cut``/copy-paste work. Tables are columns separated by two spaces
  (the last column unpadded); panels are a title line and their content indented.
* **A terminal**, however narrow: rich lays out tables and panels, and nothing essential is cut:
  table cells fold (never an ellipsis); lines of text (they hold commands, paths and URLs) are never
  broken by rich — the terminal wraps what is wider than itself, and copying gives one line.
* ``--json`` never comes here.

Untrusted text — names and paths read from disk, lines of logs, anything another program wrote —
is shown through :func:`shown`: every control character (C0, DEL, C1, ESC, the bidirectional
controls, the line separators, the BOM: tfgpu.doors.controls) appears escaped (``\\x1b``, ``\\n``), so a directory named with a terminal escape
sequence or a newline cannot recolour, retitle or rewrite the user's terminal, nor forge a line of
the output. :meth:`Stream.print` applies the same rule to everything it prints (newlines and tabs
of the tool's own layout aside), so stray escapes that reach a renderer unescaped still arrive
defused.

rich decides what a terminal is (``isatty``, ``TTY_COMPATIBLE``, ``FORCE_COLOR``), so
``TTY_COMPATIBLE=1 COLUMNS=80`` stands for an 80-column terminal in tests. Part of the CLI layer,
with ``tfgpu.cli.render.results``: library code never imports it.
"""

from __future__ import annotations

import os
import re
import sys

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from tfgpu.doors.controls import defused
from tfgpu.doors.secrets import redact

PLAIN_WIDTH = 1 << 16
"""The width a plain stream claims: more than any line, so rich never wraps or crops one."""


_WORDS = re.compile(r"\S*`[^`]*`\S*|\S+")
"""A word of prose, or a `command in backticks` with what touches it (kept on one line)."""


def table(*headers: str, **options) -> Table:
    """A table whose cells never end in "…": they wrap at spaces, and fold only a word wider than
    the terminal allows. Light rules (a line under the header, none between columns) leave the
    width to the content."""
    options = {"box": box.SIMPLE_HEAD, "show_edge": False, "pad_edge": False, "padding": (0, 1, 0, 0), **options}
    found = Table(**options)
    for header in headers:
        found.add_column(header, overflow="fold")
    return found


class _Terminal(Console):
    """A console never wider than the terminal it writes to, as that terminal is now. rich takes
    ``COLUMNS`` over the terminal's own size; exported (a profile, a wrapper script) it goes stale
    when the window is made narrower, or was never true, and every redraw of a live display wider
    than the window wraps onto rows the redraw cannot erase: hundreds of stacked copies of the
    spinner and the bars in the scrollback. ``COLUMNS`` still narrows the output, never widens it."""

    @property
    def size(self):  # noqa: D102 - rich's
        found = Console.size.fget(self)
        try:
            real = os.get_terminal_size(self.file.fileno()).columns
        except (AttributeError, ValueError, OSError):  # not a terminal (or no descriptor): rich's answer
            return found
        return found._replace(width=real) if 0 < real < found.width else found

    @size.setter
    def size(self, new_size) -> None:
        Console.size.fset(self, new_size)  # type: ignore[attr-defined]  # rich types its property as overloads


class Stream:
    """stdout (or stderr) as the tool writes to it; looked up at each call, so a redirected
    ``sys.stdout`` (tests, ``contextlib.redirect_stdout``) is honoured."""

    def __init__(self, stderr: bool = False) -> None:
        self.stderr = stderr
        self._made: tuple = (None, None, None)

    def console(self) -> Console:
        """The console for the stream as it is now (rich reads the environment and size live)."""
        stream = sys.stderr if self.stderr else sys.stdout
        if self._made[0] is not stream:
            self._made = (
                stream,
                _Terminal(file=stream, highlight=False),
                Console(
                    file=stream, highlight=False, width=PLAIN_WIDTH, color_system=None, soft_wrap=True, emoji=False
                ),
            )
        _, terminal, plain = self._made
        return terminal if terminal.is_terminal else plain

    @property
    def plain(self) -> bool:
        return not self.console().is_terminal

    def print(self, *objects, whole: bool = True, **options) -> None:
        """Print like rich. Text is printed ``whole`` (rich never breaks it; a terminal wraps what is
        wider than itself, and copying it gives one line): lines hold commands, paths and URLs.
        ``whole=False`` lets rich wrap prose at spaces. Tables and panels are laid out to the width."""
        console = self.console()
        objects = tuple(_defused_item(item) for item in objects)
        if not console.is_terminal:
            objects = tuple(plain_text(item) if isinstance(item, (Panel, Table)) else item for item in objects)
            options["soft_wrap"] = True
        else:
            for item in objects:
                if isinstance(item, Table):
                    fit(item, console.width)
            if whole and not any(isinstance(item, (Panel, Table)) for item in objects):
                options["soft_wrap"] = True
        console.print(*objects, **options)

    def prose(self, lead: str, text: str, indent: int = 2) -> None:
        """``lead`` (markup: ``warning code:``) then ``text`` (plain words, escaped here), wrapped on
        a terminal at spaces to its width, the lines after the first indented by ``indent``. A
        `command in backticks` is never broken (copied, it is one line), nor is a word wider than
        the terminal (the terminal wraps it: a path or URL stays whole). Not a terminal: one line."""
        console = self.console()
        if not console.is_terminal:
            self.print(f"{lead}{escape(text)}")
            return
        width = max(console.width - 1, 20)
        line, used, lines = lead, Text.from_markup(lead).cell_len, []
        for word in _WORDS.findall(text):
            size = Text(word).cell_len
            if used > indent and used + 1 + size > width and line.strip():
                lines.append(line)
                line, used = " " * indent + escape(word), indent + size
            else:
                spaced = "" if used == 0 or line.endswith(" ") else " "
                line, used = line + spaced + escape(word), used + len(spaced) + size
        lines.append(line)
        for each in lines:
            self.print(each)


def _defused_item(item):
    """What :meth:`Stream.print` prints, with stray control characters escaped (:func:`defused`)
    and every credential masked (``tfgpu.doors.secrets.redact``: a terminal's output ends up in CI logs)."""
    if isinstance(item, str):
        return defused(redact(item))
    if isinstance(item, Text):
        plain = redact(item.plain)
        if plain != item.plain or defused(plain) != plain:
            return Text(defused(plain), style=item.style)
        return item
    if isinstance(item, Table):
        for column in item.columns:
            column.header = _defused_item(column.header)
            column._cells[:] = [_defused_item(cell) for cell in column._cells]
        if item.title is not None:
            item.title = _defused_item(item.title)
    elif isinstance(item, Panel):
        item.renderable = _defused_item(item.renderable)
        if item.title is not None:
            item.title = _defused_item(item.title)
    return item


def fit(found: Table, width: int) -> None:
    """Give each column of ``found`` a fixed width so the table fits ``width`` columns: every
    column gets its longest line if that fits; else the columns that can wrap at spaces give way
    first (down to their longest word), and only then are the widest values folded. (rich's own
    layout shrinks every column in proportion, which folds short values that had room.)"""
    if not found.columns:
        return
    texts = [[_cell(column.header), *(_cell(cell) for cell in column.cells)] for column in found.columns]
    natural = [
        max(max((len(line) for line in text.splitlines()), default=0) for text in column) or 1 for column in texts
    ]
    shortest = [max(max((len(word) for word in text.split()), default=0) for text in column) or 1 for column in texts]
    left, right = found.padding[3], found.padding[1]
    room = width - (left + right) * len(texts) + (0 if found.pad_edge else left + right)
    if found.box:  # a separator between columns (a space in the light boxes), and the edges
        room -= len(texts) - 1 + (2 if found.show_edge else 0)
    widths = list(natural)
    while sum(widths) > max(room, len(widths)):
        slack = [i for i, w in enumerate(widths) if w > shortest[i]]
        pool = slack or [i for i, w in enumerate(widths) if w > 1]
        if not pool:
            break
        widths[max(pool, key=lambda i: widths[i])] -= 1
    for column, size in zip(found.columns, widths, strict=True):
        column.width = column.min_width = column.max_width = size


def _cell(value) -> str:
    if isinstance(value, Text):
        return value.plain
    if isinstance(value, str):
        return Text.from_markup(value).plain
    return str(value)


def plain_text(item: Panel | Table) -> Text:
    """A panel or table as plain lines (see the module docstring)."""
    if isinstance(item, Panel):
        title = _cell(item.title) if item.title is not None else ""
        inner = item.renderable
        body = plain_text(inner).plain if isinstance(inner, (Panel, Table)) else _cell(inner)
        lines = ([title] if title else []) + ["  " + line if title else line for line in body.splitlines()]
        return Text("\n".join(lines))
    columns = [[_cell(cell).replace("\n", " ") for cell in column.cells] for column in item.columns]
    headers = [_cell(column.header) for column in item.columns]
    rows = [list(row) for row in zip(*columns, strict=False)]
    if item.show_header and any(headers):
        rows.insert(0, headers)
    widths = [max((len(row[i]) for row in rows), default=0) for i in range(len(headers))]
    lines = [_cell(item.title)] if item.title else []
    for row in rows:
        lines.append("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip())
    return Text("\n".join(lines))
