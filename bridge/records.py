"""``@record``: a frozen, slotted dataclass, defined with one ``exec`` instead of six.

Why this exists. Every process of the bridge starts by importing its own value types: the
daemon (on each restart, before it can catch up on what queued while it was down), each session
host, and every CLI command the user types. On CPython 3.11 and 3.12, ``dataclasses`` compiles
each generated method from source with its own ``exec``: six for a frozen dataclass
(``__init__``, ``__repr__``, ``__eq__``, ``__hash__``, ``__setattr__``, ``__delattr__``). With
hundreds of value types in the daemon, those compilations are the largest single part of its
start; this module compiles one function per class instead, so every process starts sooner.

``@record`` keeps ``dataclasses`` for the fields and everything read from them (``fields``,
``replace``, ``asdict``, slots, ``__match_args__``) and builds the methods itself, meaning
exactly what the generated ones mean:

- ``__init__``: the dataclass signature (defaults, ``<factory>`` defaults, ``init=False`` fields
  set from their default or factory, keyword-only fields after ``*``), each field stored with
  ``object.__setattr__``, then ``__post_init__`` when the class has one. It is the one method
  compiled per class.
- ``__setattr__``/``__delattr__``: always :class:`dataclasses.FrozenInstanceError` (shared: a
  slotted class has no other attribute to set).
- ``__eq__``: equal when ``other`` is of the very same class and the fields with
  ``compare=True`` are equal as a tuple (identity first for each pair, as for a tuple);
  ``NotImplemented`` for any other class. ``__hash__``: the hash of that tuple over the fields
  whose ``hash`` is true, or ``None`` and ``compare`` true. ``__repr__``: ``Name(field=value,
  ...)`` over the fields with ``repr=True``, recursion-safe. These three are closures over an
  :func:`operator.attrgetter`, so nothing is compiled for them.
- ``__getstate__``/``__setstate__``: the field values in order, as ``dataclasses`` adds to a
  frozen slotted class, so ``copy`` and ``pickle`` work.

A method the class body writes is kept, as ``dataclasses`` keeps it. ``InitVar`` pseudo-fields
are refused (the project has none). To ``dataclasses`` the class
is not frozen (its ``__dataclass_params__`` says so); the type checker knows it is
(``frozen_default``), and so does every assignment at run time. Python 3.13 compiles a
dataclass's methods in one ``exec``; there this can become ``dataclass(frozen=True, slots=True)``
again without any caller changing. ``tests/test_records.py`` holds it to ``dataclasses``' own on
classes of every shape.
"""

from __future__ import annotations

import dataclasses
import reprlib
from collections.abc import Callable
from operator import attrgetter
from typing import Any, TypeVar, dataclass_transform

__all__ = ["record"]

_T = TypeVar("_T")
_MISSING: Any = dataclasses.MISSING


@dataclass_transform(frozen_default=True, field_specifiers=(dataclasses.field, dataclasses.Field))
def record(cls: type[_T], /) -> type[_T]:
    """``@dataclass(frozen=True, slots=True)``, with its methods built as the module docstring
    says."""
    made: type[_T] = dataclasses.dataclass(
        cls, init=False, repr=False, eq=False, frozen=False, slots=True
    )
    fields = dataclasses.fields(made)  # type: ignore[arg-type]
    declared: dict[str, dataclasses.Field[Any]] = vars(made)["__dataclass_fields__"]
    pseudo = declared.keys() - {f.name for f in fields}  # ClassVar and InitVar
    if any("InitVar" in str(declared[name].type) for name in pseudo):
        raise TypeError(f"{made.__qualname__}: @record takes no InitVar; use @dataclass for it")
    compared = _tuple_getter([f.name for f in fields if f.compare])
    hashed = _tuple_getter([f.name for f in fields if (f.compare if f.hash is None else f.hash)])
    shown = tuple(f.name for f in fields if f.repr)
    stored = tuple(f.name for f in fields)

    def __eq__(self: Any, other: object) -> bool:
        if other.__class__ is self.__class__:
            return compared(self) == compared(other)
        return NotImplemented

    def __hash__(self: Any) -> int:
        return hash(hashed(self))

    @reprlib.recursive_repr()
    def __repr__(self: Any) -> str:
        values = ", ".join(f"{name}={getattr(self, name)!r}" for name in shown)
        return f"{self.__class__.__qualname__}({values})"

    def __getstate__(self: Any) -> list[Any]:
        return [getattr(self, name) for name in stored]

    def __setstate__(self: Any, state: list[Any]) -> None:
        for name, value in zip(stored, state, strict=True):
            object.__setattr__(self, name, value)

    body = made.__dict__
    kept = {name for name in _OWN_METHODS if name in body}
    # Python itself puts ``__hash__ = None`` in a class body that defines ``__eq__`` alone.
    if body.get("__hash__", 0) is None and "__eq__" in body:
        kept.discard("__hash__")
    built: list[Callable[..., Any]] = [__eq__, __hash__, __repr__, __getstate__, __setstate__]
    for method in built:
        method.__qualname__ = f"{made.__qualname__}.{method.__name__}"
    if "__init__" not in kept:
        built.append(_init(made, fields))
    built += [_frozen_setattr, _frozen_delattr]
    for method in built:
        if method.__name__ not in kept:
            setattr(made, method.__name__, method)
    return made


_OWN_METHODS = (
    "__init__",
    "__eq__",
    "__hash__",
    "__repr__",
    "__getstate__",
    "__setstate__",
    "__setattr__",
    "__delattr__",
)


class _Factory:
    """The default of a parameter whose field has a ``default_factory`` (shown as dataclasses
    shows it)."""

    def __repr__(self) -> str:
        return "<factory>"


_FACTORY = _Factory()


def _init(cls: type, fields: tuple[dataclasses.Field[Any], ...]) -> Callable[..., None]:
    """The ``__init__`` ``dataclasses`` writes for a frozen class, compiled in one ``exec``."""
    names: dict[str, Any] = {"__record_set": object.__setattr__, "__record_factory": _FACTORY}
    positional: list[str] = []
    keyword: list[str] = []
    lines: list[str] = []
    for n, f in enumerate(fields):
        if f.default_factory is not _MISSING:
            names[f"__record_factory_{n}"] = f.default_factory
            default = "__record_factory"
            value = f"__record_factory_{n}()"
            if f.init:
                value = f"{value} if {f.name} is __record_factory else {f.name}"
        elif f.default is not _MISSING:
            names[f"__record_default_{n}"] = f.default
            default = value = f"__record_default_{n}"
            if f.init:
                value = f.name
        elif f.init:
            default, value = "", f.name
        else:
            continue  # init=False with nothing to set it from: left unset, as dataclasses does
        if f.init:
            params = keyword if f.kw_only is True else positional
            if params is positional and params and not default and "=" in params[-1]:
                raise TypeError(
                    f"{cls.__qualname__}: field {f.name!r} without a default follows one with a"
                    " default (give it a default, or make it keyword-only)"
                )
            params.append(f"{f.name}={default}" if default else f.name)
        lines.append(f"  __record_set(self, {f.name!r}, {value})")
    if hasattr(cls, "__post_init__"):
        lines.append("  self.__post_init__()")
    signature = ["self", *positional, *(["*", *keyword] if keyword else [])]
    text = f"def __init__({', '.join(signature)}):\n" + ("\n".join(lines) or "  pass")
    namespace: dict[str, Any] = {}
    exec(text, names, namespace)
    init: Callable[..., None] = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    init.__annotations__ = {f.name: f.type for f in fields if f.init} | {"return": None}
    return init


def _frozen_setattr(self: Any, name: str, value: Any) -> None:
    raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")


def _frozen_delattr(self: Any, name: str) -> None:
    raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")


_frozen_setattr.__name__ = _frozen_setattr.__qualname__ = "__setattr__"
_frozen_delattr.__name__ = _frozen_delattr.__qualname__ = "__delattr__"


def _tuple_getter(names: list[str]) -> Callable[[Any], tuple[Any, ...]]:
    """The fields `names` of an instance, always as a tuple (``attrgetter`` of one name returns
    the bare value, and a tuple compares items by identity first, as the generated code does)."""
    if not names:
        return lambda _: ()
    if len(names) == 1:
        one = attrgetter(names[0])
        return lambda instance: (one(instance),)
    return attrgetter(*names)
