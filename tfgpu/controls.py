"""The characters that must never reach a terminal or a file a human reviews: the one definition.

A name, a path, a lock's file name or a line another program printed is shown on a terminal and
written into generated scripts, Dockerfiles, YAML and modulefiles that someone reads in a change
request before running them. Some characters make what is seen differ from what is there:

* the C0 controls, DEL and the C1 controls (U+0080-U+009F): line breaks, ``ESC`` sequences, and
  C1's own single-character ``CSI`` (U+009B) that some terminals honour;
* the line and paragraph separators (U+2028, U+2029), which editors and YAML treat as line breaks;
* the bidirectional controls (U+061C, U+200E, U+200F, U+202A-U+202E, U+2066-U+2069), which reorder
  the text around them on screen ("Trojan Source", CVE-2021-42574);
* the byte order mark (U+FEFF), invisible inside text.

Every module that cleans, escapes or refuses such characters takes them from here, so the set is
widened in one place. This module imports nothing (every layer may use it), and builds no pattern
until asked: ``plan`` imports :mod:`tfgpu.requirements`, which checks with the set alone.
"""

from __future__ import annotations

RANGES = (
    (0x00, 0x1F),  # C0
    (0x7F, 0x9F),  # DEL, C1
    (0x061C, 0x061C),  # ARABIC LETTER MARK
    (0x200E, 0x200F),  # LEFT-TO-RIGHT MARK, RIGHT-TO-LEFT MARK
    (0x2028, 0x202E),  # LINE/PARAGRAPH SEPARATOR, the embeddings and overrides (LRE..RLO)
    (0x2066, 0x2069),  # the isolates (LRI, RLI, FSI, PDI)
    (0xFEFF, 0xFEFF),  # BYTE ORDER MARK / ZERO WIDTH NO-BREAK SPACE
)
"""Inclusive code point ranges."""

CHARACTERS = frozenset(chr(code) for low, high in RANGES for code in range(low, high + 1))
"""Every character of :data:`RANGES`."""


def has_control(text: str) -> bool:
    """Whether ``text`` holds one of :data:`CHARACTERS`."""
    return not CHARACTERS.isdisjoint(text)


def character_class(keep: str = "") -> str:
    """A regular expression character class (``[...]``) matching :data:`CHARACTERS` except the
    characters in ``keep`` (a tool's own layout keeps ``\\n`` and ``\\t``)."""
    codes = sorted(ord(char) for char in CHARACTERS - set(keep))
    parts, start = [], None
    for index, code in enumerate(codes):
        if start is None:
            start = code
        if index + 1 == len(codes) or codes[index + 1] != code + 1:
            parts.append(f"\\u{start:04x}" if start == code else f"\\u{start:04x}-\\u{code:04x}")
            start = None
    return "[" + "".join(parts) + "]"
