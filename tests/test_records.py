"""``@record`` means what ``@dataclass(frozen=True, slots=True)`` means (bridge/records.py).

Each shape below is declared twice, once with each decorator: the two take the same arguments
(the same ``__init__`` signature, the same values stored), and every instance pair built from
the same values compares, hashes and prints the same. Then what ``dataclasses`` still provides
(``fields``, ``replace``, ``asdict``, slots, ``match``) is checked to be there, with frozenness,
``copy`` and ``pickle``. Last, ``bridge/`` is held to declaring its frozen, slotted dataclasses
this way.
"""

from __future__ import annotations

import ast
import copy
import dataclasses
import importlib
import inspect
import math
import pickle
import pkgutil
from dataclasses import FrozenInstanceError, dataclass, field
from pathlib import Path
from typing import Any

import pytest

import bridge
from bridge.records import record

ROOT = Path(__file__).resolve().parents[1]


def twins(body: dict[str, Any], annotations: dict[str, str], name: str) -> tuple[type, type]:
    """The same class body made by ``@record`` and by ``@dataclass(frozen=True, slots=True)``."""
    made: list[type] = []
    for decorate in (record, dataclass(frozen=True, slots=True)):
        namespace = dict(body, __annotations__=dict(annotations), __qualname__=name)
        made.append(decorate(type(name, (), namespace)))
    return made[0], made[1]


SHAPES: list[tuple[str, dict[str, Any], dict[str, str], list[tuple[Any, ...]]]] = [
    ("Empty", {}, {}, [()]),
    ("One", {}, {"a": "int"}, [(1,), (2,), (True,), (1.0,)]),
    ("Two", {}, {"a": "int", "b": "str"}, [(1, "x"), (1, "y"), (2, "x")]),
    (
        "Hidden",
        {"b": field(default="", repr=False, compare=False)},
        {"a": "int", "b": "str"},
        [(1, "secret"), (1, "other"), (2, "secret")],
    ),
    (
        "HashOnlySome",
        {"b": field(default=0, hash=False)},
        {"a": "int", "b": "int"},
        [(1, 0), (1, 1), (2, 0)],
    ),
    (
        "Factory",
        {"b": field(default_factory=tuple)},
        {"a": "str", "b": "tuple[int, ...]"},
        [("x",), ("x", (1, 2)), ("y", ())],
    ),
    ("NaN", {}, {"a": "float"}, [(math.nan,), (0.0,)]),
]


INIT_SHAPES: list[tuple[str, dict[str, Any], dict[str, str], list[dict[str, Any]]]] = [
    ("Plain", {}, {"a": "int", "b": "str"}, [{"a": 1, "b": "x"}]),
    (
        "Defaults",
        {"b": "d", "c": None},
        {"a": "int", "b": "str", "c": "int | None"},
        [{"a": 1}, {"a": 1, "c": 3}],
    ),
    (
        "Factories",
        {"b": field(default_factory=list), "c": field(default_factory=dict, repr=False)},
        {"a": "int", "b": "list[int]", "c": "dict[str, int]"},
        [{"a": 1}, {"a": 1, "b": [2]}, {"a": 1, "c": {"k": 1}}],
    ),
    (
        "NotInInit",
        {
            "b": field(default=5, init=False),
            "c": field(default_factory=list, init=False),
            "d": field(init=False, repr=False, compare=False),
        },
        {"a": "int", "b": "int", "c": "list[int]", "d": "int"},
        [{"a": 1}],
    ),
    (
        "KeywordOnly",
        {"b": field(default=0, kw_only=True), "c": field(kw_only=True)},
        {"a": "int", "b": "int", "c": "str"},
        [{"a": 1, "c": "x"}, {"a": 1, "b": 2, "c": "y"}],
    ),
]


def _stored(instance: object) -> dict[str, Any]:
    """What an instance holds, unset slots left out."""
    return {
        f.name: getattr(instance, f.name)
        for f in dataclasses.fields(instance)  # type: ignore[arg-type]
        if hasattr(instance, f.name)
    }


@pytest.mark.parametrize(("name", "body", "annotations", "calls"), INIT_SHAPES)
def test_a_record_is_built_as_the_dataclass_is(
    name: str, body: dict[str, Any], annotations: dict[str, str], calls: list[dict[str, Any]]
) -> None:
    fast, plain = twins(body, annotations, name)
    assert str(inspect.signature(fast)) == str(inspect.signature(plain))
    for kwargs in calls:
        x_fast, x_plain = fast(**kwargs), plain(**kwargs)
        assert _stored(x_fast) == _stored(x_plain)
        assert repr(x_fast) == repr(x_plain)
        assert x_fast == fast(**kwargs)
    if "Factories" in name:  # a factory runs per instance, as in dataclasses
        assert fast(a=1).b is not fast(a=1).b
    with pytest.raises(TypeError):
        fast()
    with pytest.raises(TypeError):
        plain()


def test_post_init_runs_after_every_field_is_set() -> None:
    seen: list[tuple[int, list[int]]] = []

    @record
    class Checked:
        a: int
        b: list[int] = field(default_factory=list)

        def __post_init__(self) -> None:
            seen.append((self.a, self.b))
            if self.a < 0:
                raise ValueError("a must not be negative")

    Checked(1)
    assert seen == [(1, [])]
    with pytest.raises(ValueError, match="negative"):
        Checked(-1)


@pytest.mark.parametrize(("name", "body", "annotations", "values"), SHAPES)
def test_a_record_compares_hashes_and_prints_as_the_dataclass_does(
    name: str, body: dict[str, Any], annotations: dict[str, str], values: list[tuple[Any, ...]]
) -> None:
    fast, plain = twins(body, annotations, name)
    pairs = [(fast(*args), plain(*args)) for args in values]
    for x_fast, x_plain in pairs:
        assert repr(x_fast) == repr(x_plain)
        assert hash(x_fast) == hash(x_plain)
        assert x_fast == x_fast  # identity first, as in a tuple: a NaN field is equal to itself
        for y_fast, y_plain in pairs:
            assert (x_fast == y_fast) is (x_plain == y_plain)
            assert (x_fast != y_fast) is (x_plain != y_plain)
        assert x_fast != x_plain  # another class: NotImplemented both ways, so unequal
        assert x_fast.__eq__(object()) is NotImplemented


@record
class Kept:
    """Pickled by reference to its module, so it lives at the top level."""

    a: int
    b: tuple[int, ...] = ()


def test_what_dataclasses_generates_is_still_there() -> None:
    @record
    class Point:
        x: int
        y: int = 0
        tags: tuple[str, ...] = field(default_factory=tuple)

    point = Point(1)
    assert dataclasses.is_dataclass(point)
    assert [f.name for f in dataclasses.fields(point)] == ["x", "y", "tags"]
    assert dataclasses.replace(point, y=2) == Point(1, 2)
    assert dataclasses.asdict(point) == {"x": 1, "y": 0, "tags": ()}
    assert Point.__slots__ == ("x", "y", "tags")  # type: ignore[attr-defined]
    with pytest.raises(FrozenInstanceError):
        point.x = 3  # type: ignore[misc]
    with pytest.raises(FrozenInstanceError):
        del point.x
    with pytest.raises((AttributeError, TypeError)):
        point.other = 1  # type: ignore[attr-defined]
    kept = Kept(1, (2, 3))
    for twin in (copy.copy(kept), copy.deepcopy(kept), pickle.loads(pickle.dumps(kept))):
        assert twin == kept
        assert twin is not kept
    match point:
        case Point(x, y):
            assert (x, y) == (1, 0)
        case _:
            pytest.fail("no __match_args__")
    assert {point, Point(1), Point(2)} == {Point(1), Point(2)}


def test_a_subclass_compares_its_own_fields_and_never_equals_its_base() -> None:
    @record
    class Base:
        a: int

    @record
    class Child(Base):
        b: int = 0

    assert Child(1, 2) != Child(1, 3)
    assert Child(1, 2) == Child(1, 2)
    assert Base(1) != Child(1)
    assert repr(Child(1, 2)).endswith("Child(a=1, b=2)")


def test_methods_the_class_body_wrote_are_kept() -> None:
    @record
    class Secret:
        value: str

        def __repr__(self) -> str:
            return "Secret(<hidden>)"

    @record
    class ByLength:
        text: str

        def __eq__(self, other: object) -> bool:
            return isinstance(other, ByLength) and len(other.text) == len(self.text)

    @record
    class Constant:
        a: int

        def __hash__(self) -> int:
            return 7

    assert repr(Secret("hunter2")) == "Secret(<hidden>)"
    assert ByLength("ab") == ByLength("cd")
    assert hash(ByLength("ab")) == hash(("ab",))  # Python's __hash__ = None replaced, as dataclass
    assert hash(Constant(1)) == 7


def test_a_field_without_a_default_after_one_with_a_default_is_a_clear_type_error() -> None:
    with pytest.raises(TypeError, match="'b' without a default follows"):

        @record
        class Misordered:
            a: int = 0
            b: int  # type: ignore[misc]


def test_an_init_var_is_refused_at_the_class_not_ignored() -> None:
    with pytest.raises(TypeError, match="InitVar"):

        @record
        class WithInitVar:
            a: int
            b: dataclasses.InitVar[int]


def test_a_recursive_repr_does_not_recurse_forever() -> None:
    @record
    class Box:
        items: list[Any]

    box = Box([])
    box.items.append(box)
    assert repr(box).endswith("Box(items=[...])")


def _project_records() -> list[type]:
    found: list[type] = []
    for info in pkgutil.walk_packages(bridge.__path__, "bridge."):
        if info.name.endswith(".__main__"):
            continue
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            if (
                isinstance(value, type)
                and value.__module__ == info.name
                and getattr(value.__repr__, "__module__", None) == "bridge.records"
            ):
                found.append(value)
    return found


def test_the_project_declares_its_frozen_slotted_dataclasses_as_records() -> None:
    """A plain ``@dataclass(frozen=True, slots=True)`` in ``bridge/`` pays the start-up cost the
    module exists to avoid; this keeps new ones from creeping back. The permission gate and the
    wire protocol are the exceptions: they are self-contained and import nothing of the project."""
    plain: list[str] = []
    # These two import nothing of the project, on purpose (test_gate.py, test_purity.py).
    apart = (ROOT / "bridge" / "gate", ROOT / "bridge" / "protocol")
    for path in sorted((ROOT / "bridge").rglob("*.py")):
        if any(path.is_relative_to(directory) for directory in apart):
            continue
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                for decorator in node.decorator_list:
                    text = ast.unparse(decorator)
                    if text.endswith("dataclass(frozen=True, slots=True)"):
                        plain.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}")
    assert plain == []
    assert len(_project_records()) > 200
