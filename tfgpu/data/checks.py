"""The checks a table's values go through: the kinds of value (a string of a form, a number, a
flag, a list, a table, a map, rows) and the forms a string may be held to.

``tfgpu.data.schema`` says which table holds what with these. A shipped table and a ``TFGPU_DATA_DIR`` overlay (a team's mirror: data from elsewhere) are held
to the same rules: the keys the code reads, with the types it expects, and values of the form
they are used in (versions, specifiers, driver versions, checksums, URLs, image tags, regular
expressions, requirements on one line). Keys a table adds beyond these are allowed, so newer data
reads with older code. A violation is ``bad-data`` (exit 2) naming the file, the key and what was
expected.
"""

from __future__ import annotations

import re

from tfgpu.doors.controls import has_control
from tfgpu.doors.requirements import name_problem, problem, spec_problem
from tfgpu.records import record, replace
from tfgpu.versions import specifier, version


def _version(text: str) -> bool:
    return version(text) is not None


def _specifier(text: str) -> bool:
    return specifier(text) is not None


MAX_PATTERN = 1000
"""Characters of one pattern (the longest shipped signature is a fraction of it)."""


def _regex(text: str) -> bool:
    return pattern_problem(text) is None


def pattern_problem(text: str) -> str | None:
    """Why ``text`` cannot be a signature's pattern, or None. Data must not become a runaway
    program: besides compiling, a pattern is at most :data:`MAX_PATTERN` characters and has no
    repeat inside a repeat (``(a+)+``, ``(a*)*``, ``(?:x+y?)*``), the form whose backtracking is
    exponential in the length of one line (41 bytes take minutes). Cutting log lines would not hold
    that; refusing the form does. (Alternation under a repeat, ``(a|aa)+``, can still backtrack
    polynomially; the log's size cap bounds it.)"""
    if len(text) > MAX_PATTERN:
        return f"it is {len(text):,} characters long, more than {MAX_PATTERN:,}"
    try:
        parsed = _sre_parser().parse(text)
    except (re.error, RecursionError, OverflowError):
        return "it does not compile"
    if _nested_repeat(parsed, inside=False):
        return "it repeats a group that itself repeats, which backtracks without bound"
    try:
        re.compile(text)
    except (re.error, RecursionError, OverflowError):
        return "it does not compile"
    return None


def _sre_parser():
    try:
        from re import _parser  # Python 3.11+
    except ImportError:  # pragma: no cover - older Pythons
        import sre_parse as _parser
    return _parser


_REPEATS = ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT")


def _nested_repeat(items, inside: bool) -> bool:
    """Whether a repeat of more than one (``+``, ``*``, ``{2,}``) holds a repeat of variable count."""
    for op, argument in items:
        name = str(op)
        if name in _REPEATS:
            low, high, body = argument
            if inside and low != high:  # a variable repeat under a repeat of many
                return True
            if _nested_repeat(body, inside=inside or high > 1):
                return True
        elif name == "SUBPATTERN":
            if _nested_repeat(argument[-1], inside):
                return True
        elif name == "BRANCH":
            if any(_nested_repeat(branch, inside) for branch in argument[1]):
                return True
        elif name in ("ASSERT", "ASSERT_NOT"):
            if _nested_repeat(argument[1], inside):
                return True
        elif name == "ATOMIC_GROUP":
            if _nested_repeat(argument, inside):
                return True
    return False


def _one_line(text: str) -> bool:

    return not has_control(text)


def _name(text: str) -> bool:

    return name_problem(text) is None


def _requirement(text: str) -> bool:

    return problem(text) is None


def _specifier_word(text: str) -> bool:
    """A version specifier that is also safe to append to a name: one line, no spaces, not an option."""
    return _specifier(text) and not re.search(r"\s", text) and _one_line(text) and not text.startswith("-")


def _conda_name(text: str) -> bool:

    return " " not in text and spec_problem(text) is None


# The checks are records (tfgpu.records), not dataclasses: each command that reads a table imports
# this module, and a frozen dataclass costs about a millisecond to create.
@record
class Str:
    """A string; ``form`` a regular expression it must match whole, or a named check."""

    form: str | None = None
    required: bool = True
    blank: bool = True
    """``""`` is allowed (the data's "unknown")."""

    def check(self, value, where: str) -> None:
        if not isinstance(value, str):
            raise _bad(where, "a string", value)
        if value == "" and self.blank:
            return
        checks = {
            "version": (_version, "a PEP 440 version"),
            "specifier": (_specifier, "a PEP 440 specifier"),
            "regex": (_regex, "a regular expression without a repeat inside a repeat, at most 1000 characters"),
            "line": (_one_line, "one line of text"),
            "name": (_name, "a package name (PEP 508: ASCII letters, digits, '.', '_', '-')"),
            "requirement": (_requirement, "a requirement on one line (`name==1.2`), not an option or URL"),
            "pin": (_specifier_word, "a version specifier without spaces (`>=9,<10`)"),
            "conda-name": (_conda_name, "a conda package name"),
        }
        if self.form in checks:
            ok, expected = checks[self.form]
            if not ok(value):
                raise _bad(where, expected, value)
        elif self.form is not None and not re.fullmatch(self.form, value):
            raise _bad(where, f"text of the form {self.form}", value)


@record
class Int:
    required: bool = True
    minimum: int = 0

    def check(self, value, where: str) -> None:
        if not isinstance(value, int) or isinstance(value, bool) or value < self.minimum:
            raise _bad(where, f"an integer >= {self.minimum}", value)


@record
class Bool:
    required: bool = False

    def check(self, value, where: str) -> None:
        if not isinstance(value, bool):
            raise _bad(where, "true or false", value)


@record
class List:
    item: Str | Int | Bool | List | Table | Map | Rows
    required: bool = False

    def check(self, value, where: str) -> None:
        if not isinstance(value, list):
            raise _bad(where, "a list", value)
        for index, element in enumerate(value):
            self.item.check(element, f"{where}[{index}]")


@record
class Table:
    fields: dict
    required: bool = True

    def check(self, value, where: str) -> None:
        if not isinstance(value, dict):
            raise _bad(where, "a table", value)
        for key, spec in self.fields.items():
            if key in value:
                spec.check(value[key], f"{where}.{key}" if where else key)
            elif getattr(spec, "required", False):
                raise Invalid(_key(where, key), "present")


@record
class Map:
    """A table of any keys, each value of one kind; ``key``: the check each key must pass too (a
    key that becomes a package name or an option is data like any value)."""

    value: Str | Int | Bool | List | Table | Map | Rows
    required: bool = False
    key: Str | None = None

    def check(self, value, where: str) -> None:
        if not isinstance(value, dict):
            raise _bad(where, "a table", value)
        for key, element in value.items():
            if self.key is not None:
                try:
                    self.key.check(key, where)
                except Invalid as problem:
                    raise Invalid(f"a key of `{where}`", problem.expected, key, shown=True) from None
            self.value.check(element, f"{where}.{key}")


@record
class Rows:
    """An array of tables (``[[name]]``)."""

    row: Table
    required: bool = True
    nonempty: bool = True

    def check(self, value, where: str) -> None:
        if not isinstance(value, list) or not all(isinstance(row, dict) for row in value):
            raise _bad(where, "an array of tables ([[...]])", value)
        if self.nonempty and not value:
            raise _bad(where, "at least one row", value)
        for index, row in enumerate(value):
            self.row.check(row, f"{where}[{index}]")


_WAY = "Fix that file (or remove it from the TFGPU_DATA_DIR overlay to use the shipped table)."
DRIVER = r"[0-9]{2,4}(\.[0-9]{1,3}){1,2}"
SOURCES = List(Str("line"))
_OPT = {"source": SOURCES, "unverified": List(Str("line")), "note": Str("line", required=False)}


class Invalid(Exception):
    """A value that breaks its table's schema: where (a key path) and what was expected."""

    def __init__(self, where: str, expected: str, value=None, shown: bool = False) -> None:
        super().__init__(where)
        self.where, self.expected, self.value, self.shown = where, expected, value, shown


def _bad(where: str, expected: str, value) -> Invalid:
    return Invalid(f"`{where}`" if where else "the file", expected, value, shown=True)


def _key(where: str, key: str) -> str:
    path = ".".join(part for part in (where, key) if part)
    return f"`{path}`" if path else "the file"


def opt(spec):
    """The same check, for a key that may be absent."""
    return replace(spec, required=False)
