"""The tables' versions and ranges, read by tfgpu.versions without packaging, answer as packaging
does: every version in the shipped tables parses, prints, orders and compares as packaging's
Version, and every range there (and the handful of forms the tables do not hold yet) admits the
same versions and prints the same as packaging's SpecifierSet."""

from __future__ import annotations

import itertools
import re

import pytest
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from tfgpu import data
from tfgpu.versions import PlainVersion, Range, parse, version

_VERSION = re.compile(r"^v?\d+(\.\d+)*((a|b|rc)\d+)?(\.post\d+)?$")
_RANGE = re.compile(r"^\s*(~=|==|!=|<=|>=|<|>)")


def _strings(value):
    if isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, str):
        yield value


def _shipped() -> tuple[list[str], list[str]]:
    strings = {text for name in data.shipped_names() for text in _strings(data.load(name))}
    versions = sorted(text for text in strings if _VERSION.match(text))
    ranges = sorted(text for text in strings if _RANGE.match(text) and len(text) < 100 and _is_range(text))
    return versions, ranges


def _is_range(text: str) -> bool:
    try:
        SpecifierSet(text)
    except ValueError:  # prose that starts like one ('>= 528.33 for WSL on Windows')
        return False
    return True


VERSIONS, RANGES = _shipped()
EXTRA_VERSIONS = ["2.15", "2.15.0", "2.15.0.0", "2.16.0rc0", "2.16.0a1", "2.16.0b2", "2.15.0.post1", "12", "0.0"]
EXTRA_RANGES = [
    "",
    ">=2.15,<2.17",
    "==2.15.*",
    "!=2.15.*",
    "~=2.15.1",
    "~=2.15",
    ">2.15",
    "<2.16",
    "<=2.15.0",
    ">=2.16.0rc0",
]


def test_the_tables_hold_plain_versions_and_ranges():
    assert len(VERSIONS) > 50 and len(RANGES) > 10
    # All but driver versions such as 418.87.00, which packaging writes back as 418.87.0.
    others = [text for text in VERSIONS if not isinstance(parse(text.lstrip("v")), PlainVersion)]
    assert all(str(Version(text)) != text.lstrip("v") for text in others)


def _reading(version) -> tuple:
    return (
        str(version),
        version.base_version,
        version.release,
        version.major,
        version.minor,
        version.micro,
        version.is_prerelease,
        version.is_postrelease,
        version.pre,
        version.post,
        repr(version),
    )


def test_every_version_reads_as_packaging_reads_it():
    """Each version in the shipped tables (and a few forms they do not hold yet): one test over all of
    them, so the list grows with the tables without growing the suite's count."""
    wrong = []
    for text in (t.lstrip("v") for t in VERSIONS + EXTRA_VERSIONS):
        ours, theirs = parse(text), Version(text)
        if _reading(ours) != _reading(theirs) or not (ours == theirs and theirs == ours and version(text) == theirs):
            wrong.append(text)
    assert wrong == []


@pytest.mark.slow  # waits out a timeout or compares a large sample: the full run keeps it
def test_versions_order_as_packaging_orders_them():
    texts = sorted({t.lstrip("v") for t in VERSIONS + EXTRA_VERSIONS})
    for left, right in itertools.product(texts, repeat=2):
        ours, theirs = (parse(left), parse(right)), (Version(left), Version(right))
        assert (ours[0] < ours[1], ours[0] == ours[1], ours[0] <= ours[1]) == (
            theirs[0] < theirs[1],
            theirs[0] == theirs[1],
            theirs[0] <= theirs[1],
        ), (left, right)
        assert (ours[0] < theirs[1], theirs[0] > ours[1]) == (theirs[0] < theirs[1], theirs[0] > theirs[1])


def test_every_range_admits_what_packaging_admits():
    """Each range in the shipped tables (and the forms above) prints as packaging's SpecifierSet and
    admits the same versions, with and without pre-releases."""
    # Each version read once by each side, not once per range: the ranges are what is compared.
    versions = [
        (text, parse(text), Version(text)) for text in sorted({t.lstrip("v") for t in VERSIONS + EXTRA_VERSIONS})
    ]
    wrong = []
    for spec in RANGES + EXTRA_RANGES:
        ours, theirs = Range(spec), SpecifierSet(spec)
        if str(ours) != str(theirs):
            wrong.append((spec, "prints", str(ours), str(theirs)))
        for text, mine, packaging_s in versions:
            if (mine in ours) != (packaging_s in theirs):
                wrong.append((spec, text))
            if ours.contains(mine, prereleases=True) != theirs.contains(packaging_s, prereleases=True):
                wrong.append((spec, text, "prereleases=True"))
    assert wrong == []
