"""Record classes for the modules every command imports: ``@record`` in place of ``@dataclass``.

``dataclasses`` imports ``inspect`` (and with it ``ast``, ``dis``, ``tokenize``) and builds each
class's methods from source text through ``exec``: about a millisecond a class, some 50 ms for the
classes ``plan`` touches, more than the plan itself. A record keeps what the code relies on:

- fields from the class's own annotations, in order, after those of a record base class; a
  class-level value is the default, :func:`factory` makes a fresh one per instance;
  ``ClassVar[...]`` annotations are not fields;
- ``__init__`` (positional or by keyword, then ``__post_init__`` when the class has one),
  ``__repr__`` (as a dataclass writes it), ``__eq__`` on the same class, and for the frozen ones
  (the default) ``__hash__`` and assignment refused with :class:`FrozenInstanceError`;
- :func:`replace`, :func:`as_dict` and :func:`fields`, like their ``dataclasses`` namesakes.

The methods are shared closures over the field list, not generated code: nothing is compiled when
a class is created.
"""

from __future__ import annotations

_MISSING = object()


class FrozenInstanceError(AttributeError):
    """Assigning to a field of a frozen record."""


class _Factory:
    __slots__ = ("make",)

    def __init__(self, make) -> None:
        self.make = make


def factory(make):
    """A default made afresh for each instance (``factory(list)``), like ``field(default_factory=...)``."""
    return _Factory(make)


def _is_classvar(hint) -> bool:
    return isinstance(hint, str) and (hint.startswith("ClassVar") or hint.startswith("typing.ClassVar"))


def record(cls=None, *, frozen: bool = True):
    """Make ``cls`` a record (see the module docstring); ``@record`` or ``@record(frozen=False)``."""

    def build(cls):
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
        _install(cls, tuple(names), defaults, frozen)
        return cls

    return build if cls is None else build(cls)


def _install(cls, names: tuple[str, ...], defaults: dict, frozen: bool) -> None:
    known = frozenset(names)
    count = len(names)
    post_init = getattr(cls, "__post_init__", None)
    set_field = object.__setattr__

    def __init__(self, *args, **kwargs):
        if len(args) > count:
            raise TypeError(f"{cls.__name__}() takes {count} arguments but {len(args)} were given")
        for name in kwargs:
            if name not in known:
                raise TypeError(f"{cls.__name__}() got an unexpected keyword argument '{name}'")
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
            set_field(self, name, value)
        if post_init is not None:
            self.__post_init__()

    def __repr__(self):
        inner = ", ".join(f"{name}={getattr(self, name)!r}" for name in names)
        return f"{type(self).__qualname__}({inner})"

    def __eq__(self, other):
        if other.__class__ is not self.__class__:
            return NotImplemented
        return all(getattr(self, name) == getattr(other, name) for name in names)

    cls.__record_fields__ = names
    cls.__record_defaults__ = defaults
    cls.__match_args__ = names
    cls.__init__ = __init__
    if "__repr__" not in cls.__dict__:
        cls.__repr__ = __repr__
    cls.__eq__ = __eq__
    if frozen:

        def __hash__(self):
            return hash(tuple(getattr(self, name) for name in names))

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
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return type(obj)(*[as_dict(item) for item in obj])
    if isinstance(obj, (list, tuple)):
        return type(obj)(as_dict(item) for item in obj)
    if isinstance(obj, dict):
        return type(obj)((as_dict(key), as_dict(value)) for key, value in obj.items())
    if hasattr(type(obj), "__dataclass_fields__") and not isinstance(obj, type):
        import dataclasses

        return dataclasses.asdict(obj)
    return obj


def named_tuple(cls):
    """``cls`` (fields annotated, defaults last, methods) as a tuple subclass with what
    ``class X(typing.NamedTuple)`` gives (``_fields``, ``_replace``, ``_asdict``, ``_make``, field
    properties, the same ``repr``), without importing ``typing`` and without the ``eval`` that
    ``collections.namedtuple`` runs for each class."""
    from _collections import _tuplegetter

    hints = cls.__dict__.get("__annotations__", {})
    names = tuple(hints)
    defaults = {name: cls.__dict__[name] for name in names if name in cls.__dict__}
    count, known = len(names), frozenset(names)

    def __new__(kind, *args, **kwargs):
        if not kwargs and len(args) == count:
            return tuple.__new__(kind, args)
        rest = names[len(args) :]
        if len(args) > count or not kwargs.keys() <= (known if not args else set(rest)):
            extra = [name for name in kwargs if name not in rest] or [f"{count + 1}th"]
            raise TypeError(f"{kind.__name__}() got an unexpected or repeated argument '{extra[0]}'")
        try:
            return tuple.__new__(kind, args + tuple([kwargs[n] if n in kwargs else defaults[n] for n in rest]))
        except KeyError as missing:
            raise TypeError(f"{kind.__name__}() missing required argument: {missing}") from None

    def _make(kind, iterable):
        made = tuple.__new__(kind, iterable)
        if len(made) != count:
            raise TypeError(f"Expected {count} arguments, got {len(made)}")
        return made

    def _replace(self, **changes):
        made = self._make([changes.pop(name, value) for name, value in zip(names, self, strict=True)])
        if changes:
            raise ValueError(f"Got unexpected field names: {list(changes)!r}")
        return made

    def __repr__(self):
        return f"{type(self).__name__}(" + ", ".join(f"{n}={v!r}" for n, v in zip(names, self, strict=True)) + ")"

    namespace = {
        "__slots__": (),
        "__module__": cls.__module__,
        "__qualname__": cls.__qualname__,
        "__doc__": cls.__doc__ or f"{cls.__name__}({', '.join(names)})",
        "__annotations__": dict(hints),
        "_fields": names,
        "_field_defaults": defaults,
        "__match_args__": names,
        "__new__": __new__,
        "_make": classmethod(_make),
        "_replace": _replace,
        "_asdict": lambda self: dict(zip(names, self, strict=True)),
        "__getnewargs__": lambda self: tuple(self),
        "__repr__": __repr__,
    }
    for index, name in enumerate(names):
        namespace[name] = _tuplegetter(index, f"Alias for field number {index}")
    skip = {"__dict__", "__weakref__", "__annotations__", "__module__", "__qualname__", "__doc__", *names}
    namespace.update((key, value) for key, value in cls.__dict__.items() if key not in skip)
    return type(cls.__name__, (tuple,), namespace)
