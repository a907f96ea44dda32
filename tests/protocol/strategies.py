"""Hypothesis strategies for every v10 model, derived from the models' own field declarations.

Deriving them (rather than writing one strategy per model by hand) means a field added to the schema
is generated automatically, with its constraints: min lengths, integer bounds, literals, nullability,
the tri-state sentinel, free-form JSON objects. The few rules a type cannot express (the provider
base-URL rule) are overrides below.
"""

from __future__ import annotations

import functools
from types import UnionType
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from annotated_types import Ge, Gt, Le, MinLen
from hypothesis import strategies as st
from pydantic import PlainValidator, StringConstraints
from pydantic.fields import FieldInfo

from bridge.protocol import KEEP, Keep, WireModel
from bridge.protocol.primitives import (
    MAX_SAFE_INTEGER,
    Number,
    Percentage,
    SeqRange,
    TriStateNonEmptyStr,
    TriStateStr,
)
from bridge.protocol.shared import ProviderProfileWrite

__all__ = ["json_objects", "json_values", "model_strategy"]

TEXT = st.text(max_size=12)

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**64 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    TEXT,
)
json_values = st.recursive(
    json_scalars,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(TEXT, children, max_size=3),
    max_leaves=12,
)
json_objects = st.dictionaries(TEXT, json_values, max_size=4)

_numbers = st.one_of(
    st.integers(min_value=-MAX_SAFE_INTEGER, max_value=MAX_SAFE_INTEGER),
    st.floats(allow_nan=False, allow_infinity=False),
)
_bounds = st.integers(min_value=0, max_value=MAX_SAFE_INTEGER)


def _plain(validator: PlainValidator) -> Any:
    """The strategy for a field whose validation is one of the primitives' plain validators."""
    table = {
        id(get_args(Number)[1]): _numbers,
        id(get_args(Percentage)[1]): st.one_of(
            st.integers(0, 100), st.floats(min_value=0, max_value=100)
        ),
        id(get_args(SeqRange)[1]): st.tuples(_bounds, _bounds),
        id(get_args(TriStateStr)[1]): st.one_of(st.just(KEEP), st.none(), TEXT),
        id(get_args(TriStateNonEmptyStr)[1]): st.one_of(
            st.just(KEEP), st.none(), st.text(min_size=1, max_size=12)
        ),
    }
    return table[id(validator)]


def _constraints(metadata: list[Any]) -> dict[str, int]:
    found: dict[str, int] = {}
    for item in metadata:
        if isinstance(item, FieldInfo):
            found.update(_constraints(item.metadata))
        elif isinstance(item, Ge):
            found["min"] = int(item.ge)  # type: ignore[call-overload]
        elif isinstance(item, Gt):
            found["min"] = int(item.gt) + 1  # type: ignore[call-overload]
        elif isinstance(item, Le):
            found["max"] = int(item.le)  # type: ignore[call-overload]
        elif isinstance(item, MinLen | StringConstraints) and item.min_length is not None:
            found["min_length"] = item.min_length
    return found


def _strategy(annotation: Any, metadata: list[Any]) -> Any:
    if get_origin(annotation) is Annotated:
        base, *extra = get_args(annotation)
        return _strategy(base, [*metadata, *extra])
    for item in metadata:
        if isinstance(item, PlainValidator):
            return _plain(item)
    if annotation is Any:
        return json_values
    if isinstance(annotation, type) and issubclass(annotation, WireModel):
        return model_strategy(annotation)
    origin = get_origin(annotation)
    args = get_args(annotation)
    limits = _constraints(metadata)
    if origin is Literal:
        return st.sampled_from(args)
    if origin in (Union, UnionType):
        members = [arg for arg in args if arg is not type(None) and arg is not Keep]
        inner = [_strategy(member, metadata) for member in members]
        return st.one_of(st.none(), *inner)
    if origin is list:
        return st.lists(_strategy(args[0], []), min_size=limits.get("min_length", 0), max_size=3)
    if origin is dict:
        return json_objects
    if annotation is str:
        return st.text(min_size=limits.get("min_length", 0), max_size=16)
    if annotation is bool:
        return st.booleans()
    if annotation is int:
        low = limits.get("min", -MAX_SAFE_INTEGER)
        high = limits.get("max", MAX_SAFE_INTEGER)
        return st.integers(min_value=low, max_value=high)
    raise TypeError(f"no strategy for {annotation!r}")  # pragma: no cover - a new field type


_BASE_URLS = st.one_of(
    st.sampled_from(
        [
            "https://api.example.com",
            "https://api.moonshot.ai/anthropic",
            "http://localhost:8080",
            "http://127.0.0.1:11434/v1",
            "http://[::1]:3000",
        ]
    ),
    st.from_regex(r"https://[a-z][a-z0-9]{0,10}\.[a-z]{2,5}(/[a-z0-9]{0,8})?", fullmatch=True),
)

OVERRIDES: dict[tuple[type[WireModel], str], Any] = {
    (ProviderProfileWrite, "baseUrl"): _BASE_URLS,
}


@functools.cache
def model_strategy(cls: type[WireModel]) -> Any:
    """Valid instances of ``cls``, optional fields sometimes absent (``None``)."""
    fields = {}
    for name, info in cls.model_fields.items():
        if name == "type" and not info.is_required():
            continue  # the literal default
        override = OVERRIDES.get((cls, name))
        if override is not None:
            fields[name] = override
        else:
            fields[name] = _strategy(info.annotation, list(info.metadata))
    return st.builds(cls, **fields)
