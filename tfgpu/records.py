"""Record classes for the modules every command imports: ``@record`` in place of ``@dataclass``.

``dataclasses`` imports ``inspect`` (and with it ``ast``, ``dis``, ``tokenize``) and builds each
class's methods from source text through ``exec``: about a millisecond a class, some 50 ms for the
classes ``plan`` touches, more than the plan itself. A record keeps what the code relies on:

- fields from the class's own annotations, in order, after those of a record base class; a
  class-level value is the default, :func:`factory` makes a fresh one per instance (and may leave
  its field out of ``repr`` and out of equality, as ``field(repr=False, compare=False)`` does);
  ``ClassVar[...]`` annotations are not fields;
- ``__init__`` (positional or by keyword, then ``__post_init__`` when the class has one),
  ``__repr__`` (as a dataclass writes it), ``__eq__`` on the same class, and for the frozen ones
  (the default) ``__hash__`` and assignment refused with :class:`FrozenInstanceError`;
- :func:`replace`, :func:`as_dict` and :func:`fields`, like their ``dataclasses`` namesakes.

The methods are shared closures over the field list, not generated code: nothing is compiled when
a class is created.

A type checker reads ``@record`` as a dataclass (PEP 681's ``dataclass_transform``, imported only
while checking: ``typing`` costs a command's start-up some 15 ms) and ``factory(list)`` as a default
of the type ``list()`` returns.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing: type checkers treat it alike
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, TypeVar, dataclass_transform

    _T = TypeVar("_T")
else:

    def dataclass_transform(**_options):
        return lambda decorator: decorator


_MISSING = object()


class FrozenInstanceError(AttributeError):
    """Assigning to a field of a frozen record."""


class _Factory:
    __slots__ = ("make", "shown", "compared")

    def __init__(self, make, shown: bool, compared: bool) -> None:
        self.make, self.shown, self.compared = make, shown, compared


def factory(make: Callable[[], _T], *, shown: bool = True, compared: bool = True) -> _T:
    """A default made afresh for each instance (``factory(list)``), like ``field(default_factory=...)``;
    ``shown=False``: left out of ``repr``, ``compared=False``: out of ``==`` and ``hash`` (a cache)."""
    return _Factory(make, shown, compared)  # type: ignore[return-value]  # a marker __init__ calls


def _is_classvar(hint) -> bool:
    return isinstance(hint, str) and (hint.startswith("ClassVar") or hint.startswith("typing.ClassVar"))


@dataclass_transform(frozen_default=True)
def record(cls: Any = None, *, frozen: bool = True) -> Any:
    """Make ``cls`` a record (see the module docstring); ``@record`` or ``@record(frozen=False)``."""

    def build(cls: Any) -> Any:
        names: list[str] = []
        defaults: dict = {}
        for base in reversed(cls.__mro__[1:]):
            for name in base.__dict__.get("__record_fields__", ()):
                if name not in names:
                    names.append(name)
            defaults.update(base.__dict__.get("__record_defaults__", {}))
        for name, hint in cls.__dict__.get("__annotations__", {}).items():
            if _is_classvar(hint):
                continue
            if name not in names:
                names.append(name)
            value = cls.__dict__.get(name, _MISSING)
            if value is not _MISSING:
                defaults[name] = value
                if isinstance(value, _Factory):
                    delattr(cls, name)
        hidden = {name for name, value in defaults.items() if isinstance(value, _Factory) and not value.shown}
        apart = {name for name, value in defaults.items() if isinstance(value, _Factory) and not value.compared}
        _install(cls, tuple(names), defaults, frozen, hidden, apart)
        return cls

    return build if cls is None else build(cls)


def _install(cls: Any, names: tuple[str, ...], defaults: dict, frozen: bool, hidden: set, apart: set) -> None:
    known = frozenset(names)
    count = len(names)
    shown = tuple(name for name in names if name not in hidden)
    compared = tuple(name for name in names if name not in apart)
    post_init = getattr(cls, "__post_init__", None)

    def _values(args: tuple, kwargs: dict) -> dict:
        if len(args) > count:
            raise TypeError(f"{cls.__name__}() takes {count} arguments but {len(args)} were given")
        for name in kwargs:
            if name not in known:
                raise TypeError(f"{cls.__name__}() got an unexpected keyword argument '{name}'")
        values = {}
        for index, name in enumerate(names):
            if index < len(args):
                if name in kwargs:
                    raise TypeError(f"{cls.__name__}() got multiple values for argument '{name}'")
                value = args[index]
            elif name in kwargs:
                value = kwargs[name]
            elif name in defaults:
                value = defaults[name]
                if isinstance(value, _Factory):
                    value = value.make()
            else:
                raise TypeError(f"{cls.__name__}() missing required argument: '{name}'")
            values[name] = value
        return values

    def __init__(self, *args, **kwargs):
        if not kwargs and len(args) == count:  # the tables' rows: hundreds a command, all positional
            vars(self).update(zip(names, args, strict=True))
        elif not args and len(kwargs) == count and known.issuperset(kwargs):
            # Every field by name (a release's wheels, replace()): nothing to fill in or refuse, so
            # not _values' walk; in field order, as _values sets them.
            vars(self).update({name: kwargs[name] for name in names})
        else:
            vars(self).update(_values(args, kwargs))
        if post_init is not None:
            self.__post_init__()

    def __repr__(self):
        inner = ", ".join(f"{name}={getattr(self, name)!r}" for name in shown)
        return f"{type(self).__qualname__}({inner})"

    def __eq__(self, other):
        if other.__class__ is not self.__class__:
            return NotImplemented
        return all(getattr(self, name) == getattr(other, name) for name in compared)

    cls.__record_fields__ = names
    cls.__record_defaults__ = defaults
    type.__setattr__(cls, "__match_args__", names)  # mypy refuses a plain assignment to it
    cls.__init__ = __init__
    if "__repr__" not in cls.__dict__:
        cls.__repr__ = __repr__
    cls.__eq__ = __eq__
    if frozen:

        def __hash__(self):
            return hash(tuple(getattr(self, name) for name in compared))

        def __setattr__(self, name, value):
            raise FrozenInstanceError(f"cannot assign to field '{name}'")

        def __delattr__(self, name):
            raise FrozenInstanceError(f"cannot delete field '{name}'")

        cls.__hash__ = __hash__
        cls.__setattr__ = __setattr__
        cls.__delattr__ = __delattr__
    else:
        cls.__hash__ = None


def is_record(obj) -> bool:
    """Whether ``obj`` is a record or a record class."""
    return hasattr(obj, "__record_fields__")


def fields(obj) -> tuple[str, ...]:
    """The field names of a record or record class, in order."""
    return obj.__record_fields__


def replace(obj, **changes):
    """A copy of ``obj`` with ``changes`` (a dataclass too, through ``dataclasses.replace``)."""
    if not is_record(obj):
        import dataclasses

        return dataclasses.replace(obj, **changes)
    values = {name: getattr(obj, name) for name in obj.__record_fields__}
    values.update(changes)
    return type(obj)(**values)


def as_dict(obj):
    """``obj`` as plain dicts, lists and tuples, recursively, like ``dataclasses.asdict``."""
    if is_record(obj) and not isinstance(obj, type):
        return {name: as_dict(getattr(obj, name)) for name in obj.__record_fields__}
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):  # a typing.NamedTuple, as dataclasses.asdict keeps it
        return type(obj)(*[as_dict(item) for item in obj])
    if isinstance(obj, (list, tuple)):
        return type(obj)(as_dict(item) for item in obj)
    if isinstance(obj, dict):
        return type(obj)((as_dict(key), as_dict(value)) for key, value in obj.items())
    if hasattr(type(obj), "__dataclass_fields__") and not isinstance(obj, type):
        import dataclasses

        return dataclasses.asdict(obj)
    return obj
