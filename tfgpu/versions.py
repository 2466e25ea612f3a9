"""The one parser of PEP 440 versions and specifiers read from outside (the command line, a project
file, a data overlay, a lock record).

``packaging`` turns each release number into an ``int``; Python refuses to convert a string of
more than 4300 digits and raises a plain ``ValueError`` (not ``InvalidVersion``), so a hostile
version would end in a traceback. Here the text is bounded first (no real version is longer
than :data:`MAX_VERSION` characters, no real specifier longer than :data:`MAX_SPECIFIER`) and
every error ``packaging`` can raise means "not a version". Callers turn ``None`` into their own
documented error code.

The tables' own versions and ranges are read by :func:`parse` and :class:`Range`: the plain forms
they hold (``2.15.1``, ``12.5``, ``2.22.0rc0``; ``>=2.15,<2.17``, ``==2.15.*``) are parsed and
compared here; anything else, and every question about a pre-release against a range, is
``packaging``'s, so the answers are always ``packaging``'s (two tests hold them equal over every
version and range in the shipped tables). The reason is measured: ``scripts/bench_plan.py --versions``
times one plan's version reading (its import included) both ways, and ``packaging`` (``typing``, its
version and specifier patterns, a ``Version`` per text) costs close to a whole interpreter start
(``python -c pass``), this module about a seventh of one.
"""

from __future__ import annotations

MAX_VERSION = 64
MAX_SPECIFIER = 256


def version(text: object):
    """``text`` as a version (a :class:`PlainVersion` for the plain forms, else ``packaging``'s
    Version), or None when it is not a bounded PEP 440 version."""
    if not isinstance(text, str) or len(text) > MAX_VERSION:
        return None
    plain = _plain(text)
    if plain is not None:
        return plain
    # Start-up cost: `plan --json --no-detect` loads this module but not packaging.version.
    from packaging.version import InvalidVersion, Version

    try:
        return Version(text)
    except (InvalidVersion, ValueError, TypeError):
        return None


def specifier(text: object):
    """``text`` as a ``packaging`` SpecifierSet, or None when it is not a bounded PEP 440 specifier."""
    # Start-up cost: `plan --json --no-detect` loads this module but not packaging.specifiers.
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


def parse(text: str):
    """``text`` as a version: a :class:`PlainVersion` for the plain forms, else ``packaging``'s
    ``Version`` (which raises ``InvalidVersion``, a ``ValueError``, for a non-version)."""
    plain = _plain(text)
    if plain is not None:
        return plain
    # Start-up cost: `plan --json --no-detect` loads this module but not packaging.version.
    from packaging.version import Version

    return Version(text)


def _number(text: str) -> bool:
    """A release or pre-release number as ``packaging`` writes it back (no sign, no leading zero)."""
    return 0 < len(text) < 16 and text.isascii() and text.isdigit() and (text == "0" or text[0] != "0")


def _plain(text: object) -> PlainVersion | None:
    if not isinstance(text, str) or len(text) > MAX_VERSION:
        return None
    if text not in _READ:
        _READ[text] = _read_plain(text)
    return _READ[text]


_READ: dict[str, PlainVersion | None] = {}
"""Each text read once: the tables repeat the same few versions (``12.5``, ``3.11``) many times."""


def _read_plain(text: str) -> PlainVersion | None:
    head, pre, post = text, None, None
    if ".post" in head:
        head, _, number = head.partition(".post")
        if not _number(number):
            return None
        post = int(number)
    for label in ("rc", "a", "b"):
        if label in head:
            if post is not None:
                return None
            head, _, number = head.partition(label)
            if not _number(number):
                return None
            pre = (label, int(number))
            break
    parts = head.split(".")
    if not all(_number(part) for part in parts):
        return None
    return PlainVersion(tuple(int(part) for part in parts), pre, text, post)


class PlainVersion:
    """A version without epoch, post, dev or local part, written as ``packaging`` writes it: the
    same attributes and ordering as ``packaging.version.Version`` (compared with one, it defers to it)."""

    __slots__ = ("release", "pre", "post", "_text", "_key")
    epoch = 0
    dev = None
    local = None
    is_devrelease = False

    def __init__(self, release: tuple[int, ...], pre: tuple[str, int] | None, text: str, post: int | None = None):
        self.release, self.pre, self.post, self._text = release, pre, post, text
        trimmed = release
        while len(trimmed) > 1 and trimmed[-1] == 0:
            trimmed = trimmed[:-1]
        # As packaging orders them: pre-releases (a < b < rc), the final release, its post-releases.
        self._key = (trimmed, (1, "", 0) if pre is None else (0, *pre), -1 if post is None else post)

    @property
    def is_postrelease(self) -> bool:
        return self.post is not None

    @property
    def major(self) -> int:
        return self.release[0]

    @property
    def minor(self) -> int:
        return self.release[1] if len(self.release) > 1 else 0

    @property
    def micro(self) -> int:
        return self.release[2] if len(self.release) > 2 else 0

    @property
    def is_prerelease(self) -> bool:
        return self.pre is not None

    @property
    def base_version(self) -> str:
        return ".".join(str(part) for part in self.release)

    @property
    def public(self) -> str:
        return self._text

    def __str__(self) -> str:
        return self._text

    def __repr__(self) -> str:
        return f"<Version({self._text!r})>"

    def __hash__(self) -> int:
        # Equal to packaging's Version, so the hash must be too (a set may mix both); plan hashes none.
        return hash(self._full())

    def _full(self):
        # Start-up cost: `plan --json --no-detect` loads this module but not packaging.version.
        from packaging.version import Version

        return Version(self._text)

    def _pair(self, other):
        if isinstance(other, PlainVersion):
            return self._key, other._key
        # Start-up cost: `plan --json --no-detect` loads this module but not packaging.version.
        from packaging.version import Version

        if isinstance(other, Version):
            return self._full(), other
        return None

    def __eq__(self, other):
        pair = self._pair(other)
        return NotImplemented if pair is None else pair[0] == pair[1]

    def __lt__(self, other):
        pair = self._pair(other)
        return NotImplemented if pair is None else pair[0] < pair[1]

    def __le__(self, other):
        pair = self._pair(other)
        return NotImplemented if pair is None else pair[0] <= pair[1]

    def __gt__(self, other):
        pair = self._pair(other)
        return NotImplemented if pair is None else pair[0] > pair[1]

    def __ge__(self, other):
        pair = self._pair(other)
        return NotImplemented if pair is None else pair[0] >= pair[1]


_OPERATORS = ("~=", "==", "!=", "<=", ">=", "<", ">")


def _clause(text: str) -> tuple[str, tuple[int, ...], bool] | None:
    """``(operator, release, wildcard)`` of one plain clause with a final bound, else None."""
    text = text.strip()
    operator = next((op for op in _OPERATORS if text.startswith(op)), None)
    if operator is None or text.startswith("==="):
        return None
    bound = text[len(operator) :].strip()
    wildcard = bound.endswith(".*")
    if wildcard:
        if operator not in ("==", "!="):
            return None
        bound = bound[:-2]
    version = _plain(bound)
    # A post-release bound (==8.6.1.post1) is not its release: packaging answers those.
    if (
        version is None
        or version.pre is not None
        or version.post is not None
        or (operator == "~=" and len(version.release) < 2)
    ):
        return None
    return operator, version.release, wildcard


def _canonical(clause: tuple[str, tuple[int, ...], bool]) -> tuple:
    operator, release, wildcard = clause
    if not wildcard and operator != "~=":
        while len(release) > 1 and release[-1] == 0:
            release = release[:-1]
    return operator, release, wildcard


def _padded(release: tuple[int, ...], size: int) -> tuple[int, ...]:
    return release + (0,) * (size - len(release))


def _matches(clause: tuple[str, tuple[int, ...], bool], release: tuple[int, ...]) -> bool:
    """Whether a final release satisfies a plain clause (neither side has a pre, post or local part)."""
    operator, bound, wildcard = clause
    if wildcard:
        inside = _padded(release, len(bound))[: len(bound)] == bound
        return inside if operator == "==" else not inside
    if operator == "~=":
        size = max(len(release), len(bound))
        return (
            _padded(release, size) >= _padded(bound, size)
            and _padded(release, len(bound))[: len(bound) - 1] == bound[:-1]
        )
    size = max(len(release), len(bound))
    mine, theirs = _padded(release, size), _padded(bound, size)
    return {
        "==": mine == theirs,
        "!=": mine != theirs,
        "<=": mine <= theirs,
        ">=": mine >= theirs,
        "<": mine < theirs,
        ">": mine > theirs,
    }[operator]


class Range:
    """A table's PEP 440 specifier set: a final :class:`PlainVersion` against plain clauses is
    answered here; everything else (a pre-release, another form, ``prereleases=``) by ``packaging``'s
    ``SpecifierSet`` of the same text, so the answer is ``packaging``'s."""

    __slots__ = ("_text", "_clauses", "_set")

    def __init__(self, text: str = "") -> None:
        self._text = text
        parts = text.split(",") if text.strip() else []
        clauses = [clause for clause in map(_clause, parts) if clause is not None]
        self._clauses = clauses if len(clauses) == len(parts) else None
        self._set = None

    def _full(self):
        if self._set is None:
            # Start-up cost: `plan --json --no-detect` loads this module but not packaging.specifiers.
            from packaging.specifiers import SpecifierSet

            self._set = SpecifierSet(self._text)
        return self._set

    def contains(self, item, prereleases: bool | None = None) -> bool:
        if prereleases is None and self._clauses is not None:
            version = item if isinstance(item, PlainVersion) else _plain(item)
            if version is not None and version.pre is None and version.post is None:
                return all(_matches(clause, version.release) for clause in self._clauses)
        if isinstance(item, PlainVersion):
            item = item._text
        return self._full().contains(item, prereleases=prereleases)

    def __contains__(self, item) -> bool:
        return self.contains(item)

    @property
    def prereleases(self):
        return self._full().prereleases

    def __iter__(self):
        return iter(self._full())

    def __len__(self) -> int:
        return len(self._full())

    def __str__(self) -> str:
        """As ``packaging`` writes a set: its clauses sorted, without spaces (where two clauses are
        the same bound written twice, ``packaging`` decides which one is kept)."""
        if self._clauses is not None:
            parts = sorted("".join(part.split()) for part in self._text.split(",")) if self._clauses else []
            if len({_canonical(clause) for clause in self._clauses}) == len(parts):
                return ",".join(parts)
        return str(self._full())

    def __repr__(self) -> str:
        return f"<SpecifierSet({str(self)!r})>"

    def __eq__(self, other) -> bool:
        if isinstance(other, Range):
            other = other._full()
        return self._full() == other

    def __hash__(self) -> int:
        return hash(self._full())
