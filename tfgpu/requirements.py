"""The one door for package requirements and conda match specs: every one that reaches uv, pip,
rattler, a lock or an export is parsed and rendered here.

Requirements come from data (shipped tables, a ``TFGPU_DATA_DIR`` overlay, ``update-data``'s
overlay), from locks and from the tool's own code. uv and pip read a requirements file line by
line and take a line that starts with ``-`` as an *option* (``--extra-index-url=http://…``,
``-e /path``, ``--no-index``), and a bash export passes each requirement as one argv word; a
newline inside a key becomes two lines. So a requirement is never a string that was merely
formatted: it is parsed with ``packaging`` (a PEP 508 name, ASCII only, so a confusable letter
cannot pass for a known package; no URL requirement ``name @ url``; no marker unless the caller
expects one; nothing that could read as an option, no whitespace or control characters) and
rendered in ``packaging``'s canonical form.

What comes out is a :class:`Requirement` (or :class:`MatchSpec`), a ``str`` subclass only this
module mints. ``tfgpu.resolver.model.Packages`` refuses plain strings, and :func:`lines` (the text
of a requirements file) does too, so a path that builds a requirement by hand fails at once,
in tests, rather than handing data to an engine as options.
"""

from __future__ import annotations

import re

from tfgpu.errors import UsageError

NAME = re.compile(r"[A-Z0-9]|[A-Z0-9][A-Z0-9._-]*[A-Z0-9]", re.IGNORECASE | re.ASCII)
"""A distribution name (PEP 508), ASCII only."""
EXTRA = NAME
_CONDA_NAME = re.compile(r"[a-z0-9_][a-z0-9_.-]*", re.ASCII)
_CONDA_VERSION = re.compile(r"[0-9A-Za-z.*+_!=<>~,|]+", re.ASCII)
_CONDA_BUILD = re.compile(r"[A-Za-z0-9_.*]+", re.ASCII)
_UNSAFE = re.compile(r"[\s\x00-\x1f\x7f-\x9f\u2028\u2029\ufeff]")

_MINT = object()


class Requirement(str):
    """A PEP 508 requirement in canonical form; made only by :func:`requirement` and :func:`canonical`."""

    def __new__(cls, text: str, token: object = None):
        if token is not _MINT:
            raise TypeError("requirements are made by tfgpu.requirements.requirement()/canonical(), not by hand")
        return super().__new__(cls, text)

    def __reduce__(self):
        return (_remint, (str(self),))

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self


class MatchSpec(str):
    """A conda match spec (``cudnn ==9.3.0``); made only by :func:`match_spec`."""

    def __new__(cls, text: str, token: object = None):
        if token is not _MINT:
            raise TypeError("match specs are made by tfgpu.requirements.match_spec(), not by hand")
        return super().__new__(cls, text)

    def __reduce__(self):
        return (_remint_spec, (str(self),))

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self


def _remint(text: str) -> Requirement:
    return canonical(text, what="a requirement", markers=True)


def _remint_spec(text: str) -> MatchSpec:
    return match_spec(text, what="a conda spec")


def _refuse(what: str, text: object, why: str) -> UsageError:
    return UsageError("bad-requirement", f"{what}: {str(text)[:120]!r} is not a package requirement the tool "
                      f"will hand to an installer ({why}).",
                      ["Fix the data or lock it came from (a requirement is `name`, `name==1.2` or "
                       "`name[extra]>=1,<2`, on one line, never an option)."])


def name_problem(text: object) -> str | None:
    """Why ``text`` is not a distribution name, or None if it is one."""
    if not isinstance(text, str):
        return "it is not text"
    if text.startswith("-"):
        return "it starts with '-', so an installer would read it as an option"
    if _UNSAFE.search(text):
        return "it holds whitespace or control characters"
    if not NAME.fullmatch(text):
        return "a name is ASCII letters, digits, '.', '_' and '-', starting and ending with a letter or digit"
    return None


def problem(text: object, *, markers: bool = False) -> str | None:
    """Why ``text`` is not a requirement this door accepts, or None (for the data schema's checks)."""
    from packaging.requirements import InvalidRequirement
    from packaging.requirements import Requirement as Parsed

    if not isinstance(text, str):
        return "it is not text"
    if text.startswith("-"):
        return "it starts with '-', so an installer would read it as an option"
    if _UNSAFE.search(text.replace(" ", "")) or text != text.strip():
        return "it holds line breaks, tabs or control characters, or surrounding spaces"
    try:
        parsed = Parsed(text)
    except InvalidRequirement as error:
        return f"it does not parse ({str(error).splitlines()[0]})"
    if parsed.url:
        return "a URL requirement (`name @ url`) is never taken from data"
    if parsed.marker is not None and not markers:
        return "an environment marker (`; ...`) is not expected here"
    if name_problem(parsed.name):
        return name_problem(parsed.name)
    for extra in parsed.extras:
        if not EXTRA.fullmatch(extra):
            return f"the extra {extra!r} is not a name"
    return None


def canonical(text: str, *, what: str, markers: bool = False) -> Requirement:
    """``text`` parsed as one PEP 508 requirement and rendered in canonical form (``bad-requirement``
    naming ``what`` when it is not one)."""
    from packaging.requirements import Requirement as Parsed

    why = problem(text, markers=markers)
    if why:
        raise _refuse(what, text, why)
    return Requirement(str(Parsed(text)), _MINT)


def requirement(name: str, spec: str = "", *, what: str, extras: tuple[str, ...] = ()) -> Requirement:
    """The requirement for distribution ``name`` with version ``spec`` (``==2.15.0``, ``>=9,<10``)
    and ``extras``: each part checked on its own, so a name cannot carry a specifier or an option."""
    why = name_problem(name)
    if why:
        raise _refuse(what, name, why)
    for extra in extras:
        if not isinstance(extra, str) or not EXTRA.fullmatch(extra):
            raise _refuse(what, extra, "an extra is a name")
    if not isinstance(spec, str) or _UNSAFE.search(spec) or spec.lstrip().startswith("-"):
        raise _refuse(what, spec, "a version specifier is on one line, without options")
    if spec and spec.lstrip()[0] not in "=<>!~":
        raise _refuse(what, spec, "a version specifier starts with ==, >=, <=, ~=, !=, < or >")
    text = name + (f"[{','.join(extras)}]" if extras else "") + spec
    return canonical(text, what=what)


def lines(requirements) -> str:
    """The text of a requirements file: one requirement a line, each minted by this door."""
    requirements = list(requirements)
    for item in requirements:
        if not isinstance(item, Requirement):
            raise TypeError(f"{item!r} did not come through tfgpu.requirements (a requirements file takes only "
                            "requirements it made)")
    return "".join(f"{item}\n" for item in requirements)


def spec_problem(text: object, *, expected_channel: bool = False) -> str | None:
    """Why ``text`` is not a conda match spec this door accepts (``name``, ``name VERSION``,
    ``name VERSION BUILD``), or None."""
    if not isinstance(text, str):
        return "it is not text"
    if text.startswith("-"):
        return "it starts with '-', so an installer would read it as an option"
    if re.search(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\ufeff\t\n\r]", text):
        return "it holds line breaks or control characters"
    name, _, version = text.partition(" ")
    version, _, build = version.partition(" ")
    if build and not _CONDA_BUILD.fullmatch(build):
        return "a build string is one word of letters, digits, '_', '.' and '*'"
    if "::" in name:
        if not expected_channel:
            return "a channel prefix (`channel::name`) is never taken from data"
        name = name.split("::", 1)[1]
    if not _CONDA_NAME.fullmatch(name):
        return "a conda package name is lowercase ASCII letters, digits, '.', '_' and '-'"
    if version and not _CONDA_VERSION.fullmatch(version):
        return "a version is one word of digits, letters, '.', '*', and comparison operators"
    return None


def match_spec(text: str, *, what: str, expected_channel: bool = False) -> MatchSpec:
    """``text`` checked as a conda match spec (``bad-requirement`` naming ``what`` when it is not one)."""
    why = spec_problem(text, expected_channel=expected_channel)
    if why:
        raise _refuse(what, text, why)
    return MatchSpec(text, _MINT)
