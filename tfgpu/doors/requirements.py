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

from tfgpu.doors import controls
from tfgpu.errors import UsageError
from tfgpu.versions import Range

# Patterns are compiled on first use (``re``'s own cache): ``plan`` imports this module and would
# otherwise pay for every pattern here on each run.
NAME = r"[A-Z0-9]|[A-Z0-9][A-Z0-9._-]*[A-Z0-9]"
"""A distribution name (PEP 508), ASCII only (matched with ``re.IGNORECASE | re.ASCII``)."""
EXTRA = NAME
_NAME_FLAGS = re.IGNORECASE | re.ASCII
_CONDA_NAME = r"[a-z0-9_][a-z0-9_.-]*"
_CONDA_VERSION = r"[0-9A-Za-z.*+_!=<>~,|]+"
_CONDA_BUILD = r"[A-Za-z0-9_.*]+"
# tfgpu.doors.controls' set (C0, DEL, C1, line separators, bidirectional controls, the BOM) is checked
# through controls.has_control, not a pattern, as each compiled pattern costs every ``plan`` its
# compilation, and without building the set for ASCII text (every requirement the tables hold).


def __getattr__(name: str) -> frozenset[str]:
    """``_CONTROL``: the set this door checks with, controls' own (built when first read)."""
    if name == "_CONTROL":
        return controls.CHARACTERS
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _has_control(text: str) -> bool:
    return controls.has_control(text)


def _unsafe(text: str) -> bool:
    """Whitespace (what ``\\s`` matches: ``str.isspace``) or a control character."""
    return controls.has_control(text) or any(char.isspace() for char in text)


_SPEC = r"(?:==|!=|<=|>=|~=|<|>)[0-9][0-9A-Za-z.*+!_-]*"
_SIMPLE = rf"([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[([A-Za-z0-9._,-]+)\])?((?:{_SPEC},)*{_SPEC})?"
"""``name``, ``name[extra,...]``, each with a comma-separated version specifier and no spaces,
markers or URLs: the requirements the tables hold, put in canonical form without importing
``packaging.requirements`` (its import compiles some 30 patterns; ``plan`` makes only these)."""


def _is_name(text: str) -> bool:
    return re.fullmatch(NAME, text, _NAME_FLAGS) is not None


_MINT = object()


class Requirement(str):
    """A PEP 508 requirement in canonical form; made only by :func:`requirement` and :func:`canonical`."""

    def __new__(cls, text: str, token: object = None):
        if token is not _MINT:
            raise TypeError("requirements are made by tfgpu.doors.requirements.requirement()/canonical(), not by hand")
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
            raise TypeError("match specs are made by tfgpu.doors.requirements.match_spec(), not by hand")
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
    return UsageError(
        "bad-requirement",
        f"{what}: {str(text)[:120]!r} is not a package requirement the tool will hand to an installer ({why}).",
        [
            "Fix the data or lock it came from (a requirement is `name`, `name==1.2` or "
            "`name[extra]>=1,<2`, on one line, never an option)."
        ],
    )


NAME_LIMIT = 200
"""The longest distribution name taken. PEP 508 sets none; PyPI's longest names are well under
100 characters, and a name of thousands (a forged lock's, say) would otherwise be echoed whole into
every answer that names the package."""


def name_problem(text: object) -> str | None:
    """Why ``text`` is not a distribution name, or None if it is one."""
    if not isinstance(text, str):
        return "it is not text"
    if len(text) > NAME_LIMIT:
        return f"a name is at most {NAME_LIMIT} characters (this one has {len(text):,})"
    if text.startswith("-"):
        return "it starts with '-', so an installer would read it as an option"
    if _unsafe(text):
        return "it holds whitespace or control characters"
    if not _is_name(text):
        return "a name is ASCII letters, digits, '.', '_' and '-', starting and ending with a letter or digit"
    return None


def problem(text: object, *, markers: bool = False) -> str | None:
    """Why ``text`` is not a requirement this door accepts, or None (for the data schema's checks)."""
    # Start-up cost: `plan --json --no-detect` loads this module but not packaging.requirements.
    from packaging.requirements import InvalidRequirement
    from packaging.requirements import Requirement as Parsed

    if not isinstance(text, str):
        return "it is not text"
    if text.startswith("-"):
        return "it starts with '-', so an installer would read it as an option"
    if _unsafe(text.replace(" ", "")) or text != text.strip():
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
        if not _is_name(extra):
            return f"the extra {extra!r} is not a name"
    return None


def canonical(text: str, *, what: str, markers: bool = False) -> Requirement:
    """``text`` parsed as one PEP 508 requirement and rendered in canonical form (``bad-requirement``
    naming ``what`` when it is not one)."""
    simple = _simple_canonical(text)
    if simple is not None:
        return Requirement(simple, _MINT)
    # Start-up cost: `plan --json --no-detect` loads this module but not packaging.requirements.
    from packaging.requirements import Requirement as Parsed

    why = problem(text, markers=markers)
    if why:
        raise _refuse(what, text, why)
    return Requirement(str(Parsed(text)), _MINT)


def _simple_canonical(text: object) -> str | None:
    """``packaging``'s canonical form of a :data:`_SIMPLE` requirement, or None for anything else
    (which then takes the full parse). Same rendering as ``str(packaging.requirements.Requirement)``:
    the name as given, the extras sorted, the specifier set in its canonical order."""
    if not isinstance(text, str) or text.startswith("-"):
        return None
    found = re.fullmatch(_SIMPLE, text, re.ASCII)
    if found is None or name_problem(found[1]):
        return None
    name, extras, spec = found[1], found[2], found[3]
    if extras is not None and not all(_is_name(extra) for extra in extras.split(",")):
        return None
    text = name + (f"[{','.join(sorted(set(extras.split(','))))}]" if extras else "")
    if spec:
        try:
            text += str(Range(spec))  # packaging's canonical order, without importing it for the plain forms
        except ValueError:  # packaging's InvalidSpecifier
            return None
    return text


def requirement(name: str, spec: str = "", *, what: str, extras: tuple[str, ...] = ()) -> Requirement:
    """The requirement for distribution ``name`` with version ``spec`` (``==2.15.0``, ``>=9,<10``)
    and ``extras``: each part checked on its own, so a name cannot carry a specifier or an option."""
    why = name_problem(name)
    if why:
        raise _refuse(what, name, why)
    for extra in extras:
        if not isinstance(extra, str) or not _is_name(extra):
            raise _refuse(what, extra, "an extra is a name")
    if not isinstance(spec, str) or _unsafe(spec) or spec.lstrip().startswith("-"):
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
            raise TypeError(
                f"{item!r} did not come through tfgpu.doors.requirements (a requirements file takes only "
                "requirements it made)"
            )
    return "".join(f"{item}\n" for item in requirements)


def spec_problem(text: object, *, expected_channel: bool = False) -> str | None:
    """Why ``text`` is not a conda match spec this door accepts (``name``, ``name VERSION``,
    ``name VERSION BUILD``), or None."""
    if not isinstance(text, str):
        return "it is not text"
    if text.startswith("-"):
        return "it starts with '-', so an installer would read it as an option"
    if _has_control(text):
        return "it holds line breaks or control characters"
    name, _, version = text.partition(" ")
    version, _, build = version.partition(" ")
    if build and not re.fullmatch(_CONDA_BUILD, build, re.ASCII):
        return "a build string is one word of letters, digits, '_', '.' and '*'"
    if "::" in name:
        if not expected_channel:
            return "a channel prefix (`channel::name`) is never taken from data"
        name = name.split("::", 1)[1]
    if not re.fullmatch(_CONDA_NAME, name, re.ASCII):
        return "a conda package name is lowercase ASCII letters, digits, '.', '_' and '-'"
    if version and not re.fullmatch(_CONDA_VERSION, version, re.ASCII):
        return "a version is one word of digits, letters, '.', '*', and comparison operators"
    return None


def match_spec(text: str, *, what: str, expected_channel: bool = False) -> MatchSpec:
    """``text`` checked as a conda match spec (``bad-requirement`` naming ``what`` when it is not one)."""
    why = spec_problem(text, expected_channel=expected_channel)
    if why:
        raise _refuse(what, text, why)
    return MatchSpec(text, _MINT)
