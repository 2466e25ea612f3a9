"""tfgpu.records stands in for dataclasses on the paths every command takes: a record behaves as
the frozen dataclass it replaces where the code relies on it (construction, defaults, immutability,
equality, hashing, repr, replace/as_dict), and a type checker reads it as one."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import textwrap

import pytest

from tfgpu.records import FrozenInstanceError, as_dict, factory, fields, record, replace


@record
class Point:
    x: int
    y: int = 0
    tags: list = factory(list)


@dataclasses.dataclass(frozen=True)
class DataPoint:
    x: int
    y: int = 0
    tags: list = dataclasses.field(default_factory=list)


@record(frozen=False)
class Loose:
    name: str
    seen: list = factory(list)

    def __post_init__(self) -> None:
        self.seen.append(self.name)


@record
class Child(Point):
    z: int = 5


def test_a_record_builds_compares_and_prints_as_a_frozen_dataclass():
    point, data = Point(1, y=2), DataPoint(1, y=2)
    assert repr(point).replace("Point", "DataPoint", 1) == repr(data) == "DataPoint(x=1, y=2, tags=[])"
    assert point == Point(1, 2) and point != Point(2, 2) and Point(1) == Point(x=1, y=0)
    assert Point(1).tags is not Point(1).tags
    assert fields(Point) == ("x", "y", "tags") and fields(point) == tuple(f.name for f in dataclasses.fields(data))
    assert hash(Point(1, 2, ())) == hash(Point(1, 2, ()))
    with pytest.raises(FrozenInstanceError):
        point.x = 3
    with pytest.raises(TypeError):
        Point()
    with pytest.raises(TypeError):
        Point(1, 2, [], 4)
    with pytest.raises(TypeError):
        Point(1, w=2)
    with pytest.raises(TypeError):
        Point(1, x=1)


def test_replace_as_dict_inheritance_and_post_init():
    point = Point(1, 2, [Point(3)])
    assert replace(point, y=9) == Point(1, 9, [Point(3)]) and point.y == 2
    assert as_dict(point) == dataclasses.asdict(DataPoint(1, 2, [{"x": 3, "y": 0, "tags": []}]))
    assert fields(Child) == ("x", "y", "tags", "z") and Child(1).z == 5 and Child(1) != Point(1)
    loose = Loose("a")
    assert loose.seen == ["a"] and Loose.__hash__ is None
    loose.name = "b"
    assert replace(DataPoint(1), y=3) == DataPoint(1, 3)  # a dataclass goes to dataclasses.replace


def test_a_factory_field_may_stay_out_of_repr_and_equality():
    """As ``field(repr=False, compare=False)``: a cache a record carries is not what it is."""

    @record(frozen=False)
    class Facts:
        name: str
        cache: dict = factory(dict, shown=False, compared=False)
        text: str | None = factory(lambda: None, shown=False)

    one, two = Facts("a"), Facts("a")
    one.cache["k"] = 1
    assert one == two and repr(one).endswith(".Facts(name='a')") and Facts("a", {}, "x") != Facts("a", {}, "y")
    assert as_dict(one) == {"name": "a", "cache": {"k": 1}, "text": None}


def test_positional_and_keyword_construction_agree():
    """All fields given positionally (the tables' rows) and any other call build the same record."""
    assert Point(1, 2, [3]) == Point(x=1, y=2, tags=[3]) == Point(1, tags=[3], y=2)
    assert vars(Point(1, 2, [3])) == vars(Point(1, y=2, tags=[3])) == {"x": 1, "y": 2, "tags": [3]}
    assert Loose("a", []).seen == ["a"]  # __post_init__ runs on both paths
    with pytest.raises(TypeError, match="multiple values"):
        Point(1, 2, [], x=1)


def test_records_compare_by_class_not_as_tuples():
    @record
    class Other:
        x: int
        y: int = 0
        tags: list = factory(list)

    assert Point(1) != Other(1) and Point(1) != (1, 0, [])
    with pytest.raises(TypeError):
        iter(Point(1))


@pytest.mark.slow
def test_the_type_checker_reads_a_record_as_a_dataclass(tmp_path):
    """mypy sees a record's fields, defaults, factory defaults and frozenness (PEP 681)."""
    source = tmp_path / "uses.py"
    source.write_text(
        textwrap.dedent(
            """
            from tfgpu.records import factory, record

            @record
            class Point:
                x: int
                tags: list[str] = factory(list)

            @record(frozen=False)
            class Loose:
                name: str

            Point(1)
            Point(1, ["a"])
            Point(x=1, tags=[])
            Loose("a").name = "b"
            Point()
            Point("1")
            Point(1, z=2)
            Point(1).x = 2
            """
        )
    )
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-incremental", "--cache-dir", str(tmp_path / "cache"), str(source)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    errors = [line.split(": error: ")[0].rsplit(":", 1)[1] for line in done.stdout.splitlines() if ": error: " in line]
    assert errors == ["17", "18", "19", "20"], done.stdout  # the last four lines, each refused
