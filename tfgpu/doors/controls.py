"""The characters that must never reach a terminal or a file a human reviews: the one definition.

A name, a path, a lock's file name or a line another program printed is shown on a terminal and
written into generated scripts, Dockerfiles, YAML and modulefiles that someone reads in a change
request before running them. Some characters make what is seen differ from what is there:

* the C0 controls, DEL and the C1 controls (U+0080-U+009F): line breaks, ``ESC`` sequences, and
  C1's own single-character ``CSI`` (U+009B) that some terminals honour;
* the line and paragraph separators (U+2028, U+2029), which editors and YAML treat as line breaks;
* the bidirectional controls (U+061C, U+200E, U+200F, U+202A-U+202E, U+2066-U+2069), which reorder
  the text around them on screen ("Trojan Source", CVE-2021-42574);
* the byte order mark (U+FEFF), invisible inside text;
* every other character Unicode itself says to render as nothing (its Default_Ignorable_Code_Point
  list: the soft hyphen, the zero-width space and joiners, the word joiner and invisible operators,
  the Hangul fillers, the variation selectors and the tag characters U+E0000-U+E0FFF, which can spell
  out a hidden ASCII text after a visible one) and the interlinear annotation marks (U+FFF9-U+FFFB),
  which hide the text between them: ``team\u200block.txt`` shows as ``teamlock.txt``;
* the lone surrogates (U+D800-U+DFFF): a path that is not UTF-8 reaches Python with its bytes as
  surrogates (``os.fsdecode``), which no UTF-8 file or terminal can hold.

Every module that cleans, escapes or refuses such characters takes them from here, so the set is
widened in one place; :func:`shown` is how any layer puts untrusted text into a message. This module
imports only ``re`` (every layer may use it), and builds nothing until asked: neither the set of its
6,292 characters (:data:`CHARACTERS`, made on first use: 10.5M instructions, a quarter of a bare
``python -c pass``) nor a pattern. Text that is all ASCII, what nearly every check meets, is judged
without either: among ASCII characters, :data:`RANGES` holds exactly those ``str.isprintable``
refuses (C0 and DEL).
"""

from __future__ import annotations

import re

RANGES = (
    (0x00, 0x1F),  # C0
    (0x7F, 0x9F),  # DEL, C1
    (0xAD, 0xAD),  # SOFT HYPHEN
    (0x034F, 0x034F),  # COMBINING GRAPHEME JOINER
    (0x061C, 0x061C),  # ARABIC LETTER MARK
    (0x115F, 0x1160),  # HANGUL CHOSEONG/JUNGSEONG FILLER
    (0x17B4, 0x17B5),  # KHMER VOWEL INHERENT AQ/AA
    (0x180B, 0x180F),  # MONGOLIAN FREE VARIATION SELECTORS, VOWEL SEPARATOR
    (0x200B, 0x200F),  # ZERO WIDTH SPACE, NON-JOINER, JOINER, LEFT-TO-RIGHT MARK, RIGHT-TO-LEFT MARK
    (0x2028, 0x202E),  # LINE/PARAGRAPH SEPARATOR, the embeddings and overrides (LRE..RLO)
    (0x2060, 0x206F),  # WORD JOINER, invisible operators, the isolates (LRI..PDI), deprecated formats
    (0x3164, 0x3164),  # HANGUL FILLER
    (0xD800, 0xDFFF),  # lone surrogates (os.fsdecode's stand-ins for bytes that are not UTF-8)
    (0xFE00, 0xFE0F),  # VARIATION SELECTORS 1-16
    (0xFEFF, 0xFEFF),  # BYTE ORDER MARK / ZERO WIDTH NO-BREAK SPACE
    (0xFFA0, 0xFFA0),  # HALFWIDTH HANGUL FILLER
    (0xFFF0, 0xFFFB),  # unassigned ignorables, INTERLINEAR ANNOTATION ANCHOR/SEPARATOR/TERMINATOR
    (0x1BCA0, 0x1BCA3),  # SHORTHAND FORMAT controls
    (0x1D173, 0x1D17A),  # MUSICAL SYMBOL BEGIN/END formats
    (0xE0000, 0xE0FFF),  # TAG characters, VARIATION SELECTORS 17-256, the rest of the ignorable block
)
"""Inclusive code point ranges."""

CHARACTERS: frozenset[str]
"""Every character of :data:`RANGES` (made on first use: :func:`__getattr__`)."""


def _characters() -> frozenset[str]:
    made = globals().get("CHARACTERS")
    if made is None:
        made = frozenset(chr(code) for low, high in RANGES for code in range(low, high + 1))
        globals()["CHARACTERS"] = made  # one set a process: later reads find the module's attribute
    return made


def __getattr__(name: str) -> frozenset[str]:
    if name == "CHARACTERS":
        return _characters()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def has_control(text: str) -> bool:
    """Whether ``text`` holds one of :data:`CHARACTERS`."""
    if text.isascii():
        return not text.isprintable()  # an ASCII character is in RANGES exactly when it is not printable
    return not _characters().isdisjoint(text)


def character_class(keep: str = "") -> str:
    """A regular expression character class (``[...]``) matching :data:`CHARACTERS` except the
    characters in ``keep`` (a tool's own layout keeps ``\\n`` and ``\\t``). Built once a process for each
    ``keep``: the console, the lock's checks and uv's output reader each ask for one."""
    key = "".join(sorted(set(keep)))  # "\n\t" and "\t\n" keep the same characters
    built = _CLASSES.get(key)
    if built is None:
        built = _CLASSES[key] = _build_class(key)
    return built


_CLASSES: dict[str, str] = {}


def _build_class(keep: str) -> str:
    codes = sorted(ord(char) for char in _characters() - set(keep))
    parts, start = [], None
    for index, code in enumerate(codes):
        if start is None:
            start = code
        if index + 1 == len(codes) or codes[index + 1] != code + 1:
            parts.append(_escape(start) if start == code else f"{_escape(start)}-{_escape(code)}")
            start = None
    return "[" + "".join(parts) + "]"


def _escape(code: int) -> str:
    """A code point as a regular expression escape: ``\\uXXXX``, or ``\\UXXXXXXXX`` past the BMP."""
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
_PATTERNS: dict[str, re.Pattern[str]] = {}


def _pattern(keep: str) -> re.Pattern[str]:
    found = _PATTERNS.get(keep)
    if found is None:
        found = _PATTERNS[keep] = re.compile(character_class(keep=keep))
    return found


def _escaped(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    if char in _NAMED:
        return _NAMED[char]
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def shown(text: object) -> str:
    """``text`` (a name, a path, a line read from disk) as it may reach a terminal or a message: every
    control character escaped, newlines and tabs included, so it stays one line of plain characters."""
    text = str(text)
    if not has_control(text):  # nothing to escape: no pattern built (a plan's messages, its paths)
        return text
    return _pattern("").sub(_escaped, text)


def defused(text: str) -> str:
    """``text`` with every control character but newline and tab escaped (the tool's own layout)."""
    if not has_control(text):
        return text
    return _pattern("\n\t").sub(_escaped, text)
