"""tfgpu.records stands in for dataclasses and typing.NamedTuple on the paths every command takes:
each behaves as the class it replaces where the code relies on it (construction, defaults,
immutability, equality, hashing, repr, replace/as_dict, tuple behaviour)."""

from __future__ import annotations

import dataclasses
import pickle
from typing import NamedTuple

import pytest

from tfgpu.records import FrozenInstanceError, as_dict, factory, fields, named_tuple, record, replace


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


class Typed(NamedTuple):
    """A typed one."""

    name: str
    size: int = 1

    def twice(self) -> int:
        return self.size * 2


@named_tuple
class Ours:
    """A typed one."""

    name: str
    size: int = 1

    def twice(self) -> int:
        return self.size * 2


def test_a_named_tuple_behaves_as_typing_named_tuple():
    ours, typed = Ours("a", 3), Typed("a", 3)
    assert repr(ours).replace("Ours", "Typed") == repr(typed)
    assert ours == typed and tuple(ours) == ("a", 3) and ours.twice() == 6 and Ours("a").size == 1
    assert Ours._fields == Typed._fields and Ours._field_defaults == Typed._field_defaults
    assert ours._replace(size=4) == Ours("a", 4) and ours._asdict() == typed._asdict()
    assert Ours._make(["b", 2]) == Ours(name="b", size=2) and sorted([Ours("b"), Ours("a")])[0].name == "a"
    assert Ours.__doc__ == "A typed one." and hash(ours) == hash(typed)
    assert pickle.loads(pickle.dumps(ours)) == ours
    name, size = ours
    assert (name, size) == ("a", 3)
    with pytest.raises(TypeError):
        Ours()
    with pytest.raises(TypeError):
        Ours("a", nope=1)
    with pytest.raises(AttributeError):
        ours.name = "b"
