"""What each table in ``tfgpu/data`` must look like, checked whenever a table is parsed.

A shipped table and a ``TFGPU_DATA_DIR`` overlay (a team's mirror: data from elsewhere) are held
to the same rules: the keys the code reads, with the types it expects, and values of the form
they are used in (versions, specifiers, driver versions, checksums, URLs, image tags, regular
expressions, requirements on one line). Keys a table adds beyond these are allowed, so newer data
reads with older code. A violation is ``bad-data`` (exit 2) naming the file, the key and what was
expected.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from tfgpu.errors import UsageError


def _version(text: str) -> bool:
    from tfgpu.versions import version

    return version(text) is not None


def _specifier(text: str) -> bool:
    from tfgpu.versions import specifier

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
    return not re.search(r"[\x00-\x1f\x7f\x85\u2028\u2029]", text)


def _name(text: str) -> bool:
    from tfgpu.requirements import name_problem

    return name_problem(text) is None


def _requirement(text: str) -> bool:
    from tfgpu.requirements import problem

    return problem(text) is None


def _specifier_word(text: str) -> bool:
    """A version specifier that is also safe to append to a name: one line, no spaces, not an option."""
    return _specifier(text) and not re.search(r"[\s\x00-\x1f\x7f-\x9f]", text) and not text.startswith("-")


def _conda_name(text: str) -> bool:
    from tfgpu.requirements import spec_problem

    return " " not in text and spec_problem(text) is None


# The checks are NamedTuples, not dataclasses: each command that reads a table imports this module,
# and a frozen dataclass costs about a millisecond to create.
class Str(NamedTuple):
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
        checks = {"version": (_version, "a PEP 440 version"), "specifier": (_specifier, "a PEP 440 specifier"),
                  "regex": (_regex, "a regular expression without a repeat inside a repeat, at most 1000 characters"), "line": (_one_line, "one line of text"),
                  "name": (_name, "a package name (PEP 508: ASCII letters, digits, '.', '_', '-')"),
                  "requirement": (_requirement, "a requirement on one line (`name==1.2`), not an option or URL"),
                  "pin": (_specifier_word, "a version specifier without spaces (`>=9,<10`)"),
                  "conda-name": (_conda_name, "a conda package name")}
        if self.form in checks:
            ok, expected = checks[self.form]
            if not ok(value):
                raise _bad(where, expected, value)
        elif self.form is not None and not re.fullmatch(self.form, value):
            raise _bad(where, f"text of the form {self.form}", value)


class Int(NamedTuple):
    required: bool = True
    minimum: int = 0

    def check(self, value, where: str) -> None:
        if not isinstance(value, int) or isinstance(value, bool) or value < self.minimum:
            raise _bad(where, f"an integer >= {self.minimum}", value)


class Bool(NamedTuple):
    required: bool = False

    def check(self, value, where: str) -> None:
        if not isinstance(value, bool):
            raise _bad(where, "true or false", value)


class List(NamedTuple):
    item: object
    required: bool = False

    def check(self, value, where: str) -> None:
        if not isinstance(value, list):
            raise _bad(where, "a list", value)
        for index, element in enumerate(value):
            self.item.check(element, f"{where}[{index}]")


class Table(NamedTuple):
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


class Map(NamedTuple):
    """A table of any keys, each value of one kind; ``key``: the check each key must pass too (a
    key that becomes a package name or an option is data like any value)."""

    value: object
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


class Rows(NamedTuple):
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
    return spec._replace(required=False)


WHEEL = Table({"python": List(Str(r"[0-9]+\.[0-9]+")), "platform_tag": opt(Str("line")),
               "cuda_build": Bool(), "cuda": opt(Str("version")), "cudnn": opt(Str("version")),
               "compute_capabilities": List(Str(r"(sm|compute)_[0-9]{2,3}[a-z]?|[0-9]+\.[0-9]+")),
               "shim_for": opt(Str("line")), "wheel": opt(Str("line")), "cudnn_compiled": opt(Str("version")),
               "ptx_isa": opt(Str(r"[0-9]+\.[0-9]+")), "source": SOURCES, "unverified": List(Str("line"))})
SCHEMAS: dict[str, Table] = {
    "tensorflow.toml": Table({"release": Rows(Table({
        "version": Str("version", blank=False), "uploaded": opt(Str("line")), "requires_python": opt(Str("specifier")),
        "gpu_package": opt(Str("name")), "numpy": opt(Str("line")), "prerelease": Bool(),
        "cuda_extra": opt(Str(r"[a-z0-9]([a-z0-9-]*[a-z0-9])?")),
        "and_cuda": Map(Str("pin"), key=Str("name", blank=False)),
        "wheels": Map(WHEEL, key=Str(r"[a-z0-9_]+", blank=False)),
        "source": SOURCES}))}),
    "tensorflow_series.toml": Table({"series": Rows(Table({
        "series": Str(r"[0-9]+\.[0-9]+", blank=False), "python": Str("line"), "compiler": Str("line"),
        "bazel": Str("line"), "cuda": Str("line"), "cudnn": Str("line"), **_OPT}))}),
    "quirks.toml": Table({"quirk": Rows(Table({
        "code": Str(r"[a-z0-9][a-z0-9-]*", blank=False), "tensorflow": Str("specifier"),
        "modes": List(Str(r"pip|conda|system")), "python": opt(Str("specifier")), "effect": Str(r"[a-z-]+"),
        "newer": opt(Str("line")), "message": Str("line"), "fix": Str("line"), "source": SOURCES}))}),
    "cuda.toml": Table({
        "toolkit": Rows(Table({
            "version": Str("version", blank=False), "linux": opt(Str(DRIVER)), "windows": opt(Str(DRIVER)),
            "runfile": opt(Str(r"[A-Za-z0-9._+-]+")), "runfile_url": opt(Str(r"(https?|file)://[^\s]+")),
            "md5": opt(Str(r"[0-9a-f]{32}")), "sha256": opt(Str(r"[0-9a-f]{64}")), **_OPT})),
        "mvc": Rows(Table({"cuda_major": Int(), "mvc": Bool(), "linux": opt(Str(DRIVER)), "windows": opt(Str(DRIVER)),
                           **_OPT}), required=False),
        "wsl2": Table({"min_driver": opt(Str(DRIVER))}, required=False),
        "wsl2_driver": Rows(Table({"cuda_major": Int(), "min_driver": Str(DRIVER), **_OPT}), required=False)}),
    "cudnn_archives.toml": Table({"archive": Rows(Table({
        "version": Str("version", blank=False), "cuda_major": Int(), "cuda_min": opt(Str("line")),
        "cuda_max": opt(Str("line")), "platform": opt(Str(r"[a-z0-9_]+")), "filename": Str(r"[A-Za-z0-9._+-]+"),
        "url": Str(r"(https?|file)://[^\s]+"), "sha256": opt(Str(r"[0-9a-f]{64}")), "size": opt(Int()),
        "manifest": opt(Str("line")), **_OPT}), nonempty=False)}),
    "gpu_peaks.toml": Table({"arch": Rows(Table({
        "cc": Str(r"[0-9]+\.[0-9]+", blank=False), "name": Str("line"), "fp32": Int(), "tf32": Int(), "fp16": Int(),
        "bf16": Int(), "source": SOURCES}))}),
    "docker_images.toml": Table({"image": Rows(Table({
        "cuda": Str("version", blank=False), "cudnn_major": Int(), "os": Str("line"), "python": Str(r"3\.[0-9]+"),
        "tag": Str(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}", blank=False), **_OPT}), nonempty=False)}),
    "log_signatures.toml": Table({"signature": Rows(Table({
        "id": Str(r"[a-z0-9][a-z0-9.-]*", blank=False), "title": Str("line"), "pattern": Str("regex", blank=False),
        "severity": Str(r"fail|warn|info"), "cause": Str("line"), "fix": Str("line"), "source": SOURCES,
        "example": opt(Str()), "shadows": List(Str("line"))}), nonempty=False)}),
    "metal.toml": Table({"metal": Rows(Table({
        "tensorflow": Str("specifier"), "metal": Str("version", blank=False), "macos": opt(Str("line")),
        "python": List(Str(r"[0-9]+\.[0-9]+")), "x86_64": Bool(), "package": opt(Str("name")), **_OPT}))}),
    "conda_forge.toml": Table({
        "cudatoolkit": Table({"versions": List(Str("version"), required=True)}),
        "cuda_version": Table({"versions": List(Str("version"), required=True)}),
        "cuda12_packages": Table({"names": List(Str("conda-name", blank=False), required=True)}),
        "tensorflow": Rows(Table({"versions": List(Str("version")), "cuda": List(Str("version"))}), required=False)}),
    "conda_cudnn.toml": Table({"cudnn": Rows(Table({
        "version": Str("version", blank=False), "cuda": List(Str("version")), "cuda_win": List(Str("version")),
        "runs_with": List(Str("line")), "skip": List(Str("line")), "source": SOURCES}))}),
    "ptx.toml": Table({"target": Rows(Table({"cc": Str(r"[0-9]+\.[0-9]+"), "min_ptx_isa": Str(r"[0-9]+\.[0-9]+"),
                                             "name": opt(Str("line")), "source": SOURCES})),
                       "xla": Table({"cuda_to_ptx_isa": Map(Str(r"[0-9]+\.[0-9]+"), key=Str(r"[0-9]+\.[0-9]+")), "rule": opt(Str("line")),
                                     "error": opt(Str("line"))}, required=False)}),
    "macos_wheels.toml": Table({"wheels": Rows(Table({
        "project": Str("name", blank=False), "version": Str("version", blank=False),
        "prerelease": Bool(), "yanked": Bool(), "macos_x86_64": List(Str(r"[0-9]+\.[0-9]+")),
        "macos_arm64": List(Str(r"[0-9]+\.[0-9]+")), "source": SOURCES}))}),
    "pip_cuda.toml": Table({"set": Rows(Table({
        "tensorflow": Str("specifier"), "cuda": Str("version"), "cudnn": Str("version"),
        "packages": List(Str("requirement", blank=False), required=True),
        "source": SOURCES}), nonempty=False),
        "ptxas": Table({"first_good": opt(Str("version")), "package": opt(Str("name"))}, required=False)}),
    "sonames.toml": Table({"cuda": Rows(Table({
        "versions": Str("specifier"), "source": SOURCES,
        "libraries": Rows(Table({"name": Str(r"[A-Za-z0-9_]+"), "soname": Str(r"lib[A-Za-z0-9_.{}-]+\.so[0-9.{}a-z_]*"),
                                 "version_symbol": opt(Str(r"[A-Za-z_][A-Za-z0-9_]*"))}))}))}),
    "windows.toml": Table({"release": Rows(Table({"series": Str(r"[0-9]+\.[0-9]+")}), required=False)}),
    "sources.toml": Table({"sources": Map(Table({"title": opt(Str()), "url": opt(Str("line"))}))}),
}


def validate(name: str, document: dict, where: str) -> None:
    """Check one parsed table against its schema; ``where`` names the file in messages."""
    schema = SCHEMAS.get(name)
    if schema is None:
        return
    try:
        schema.check(document, "")
    except Invalid as problem:
        if problem.expected == "present":
            message = f"{where}: {problem.where} is missing."
        else:
            message = f"{where}: {problem.where} must be {problem.expected}, not {repr(problem.value)[:80]}."
        raise UsageError("bad-data", message, [_WAY]) from None


def _fits(spec, value) -> bool:
    """Whether ``value`` has the *types* ``spec`` asks for, every leaf (no forms: no version or regex
    parsed). Loops, not a call per leaf: it runs on each table a command reads back from the cache."""
    kind = type(spec)  # the spec classes are never subclassed
    if kind is Str:
        return isinstance(value, str)
    if kind is Int or kind is Bool:
        return isinstance(value, bool) if kind is Bool else isinstance(value, int) and not isinstance(value, bool)
    if kind is List or kind is Rows:
        item = spec.item if kind is List else spec.row
        if type(item) is Str:
            return isinstance(value, list) and all(isinstance(element, str) for element in value)
        return isinstance(value, list) and all(_fits(item, element) for element in value)
    if kind is Map:
        return isinstance(value, dict) and all(isinstance(k, str) and _fits(spec.value, v) for k, v in value.items())
    if kind is Table:
        if not isinstance(value, dict):
            return False
        for key, field in spec.fields.items():
            if not (_fits(field, value[key]) if key in value else not getattr(field, "required", False)):
                return False
    return True


def fits(name: str, document) -> bool:
    """Whether a table read back from the parsed-data cache has every type its schema asks for: the
    full :func:`validate` costs ~100 ms a run (versions and specifiers parsed), this walk a few; the
    cache holds only what :func:`validate` passed, so a cache that does not fit was not written by
    the tool and is parsed again."""
    schema = SCHEMAS.get(name)
    return isinstance(document, dict) and (schema is None or _fits(schema, document))
