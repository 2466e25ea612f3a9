"""The one parser of PEP 440 versions and specifiers read from outside (the command line, a project
file, a data overlay, a lock record).

``packaging`` turns each release number into an ``int``; Python refuses to convert a string of
more than 4300 digits and raises a plain ``ValueError`` (not ``InvalidVersion``), so a hostile
version would end in a traceback. Here the text is bounded first (no real version is longer
than :data:`MAX_VERSION` characters, no real specifier longer than :data:`MAX_SPECIFIER`) and
every error ``packaging`` can raise means "not a version". Callers turn ``None`` into their own
documented error code.
"""

from __future__ import annotations

MAX_VERSION = 64
MAX_SPECIFIER = 256


def version(text: object):
    """``text`` as a ``packaging`` Version, or None when it is not a bounded PEP 440 version."""
    from packaging.version import InvalidVersion, Version

    if not isinstance(text, str) or len(text) > MAX_VERSION:
        return None
    try:
        return Version(text)
    except (InvalidVersion, ValueError, TypeError):
        return None


def specifier(text: object):
    """``text`` as a ``packaging`` SpecifierSet, or None when it is not a bounded PEP 440 specifier."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    if not isinstance(text, str) or len(text) > MAX_SPECIFIER:
        return None
    try:
        parsed = SpecifierSet(text)
        for one in parsed:  # each bound is a version too: its digits must convert
            if one.version.endswith(".*"):
                continue
            if version(one.version) is None and not one.operator == "===":
                return None
    except (InvalidSpecifier, ValueError, TypeError):
        return None
    return parsed


def is_canonical_release(text: object) -> bool:
    """Whether ``text`` is a version written as ``packaging`` writes it back (``2.15.1``,
    ``2.22.0rc0``): safe as part of a file name (no separator, no ``..``)."""
    parsed = version(text)
    return parsed is not None and str(parsed) == text
