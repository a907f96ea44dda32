"""JSON-level building blocks of the v10 models, with zod's semantics rather than pydantic's defaults.

The reference implementation validates with zod; its corpus and its Rust mirror agree with it, so
zod's behaviour is the contract (PROTOCOL-v10-wire.md §2). Pydantic's defaults differ in ways that
matter on the wire, and this module closes each gap once:

- **Strings and booleans are strict.** ``"1"`` is not an int and ``1`` is not a bool.
- **"int" is a JSON number with an integral value** (§2.7). JavaScript has no integer type:
  ``JSON.parse("1.0")`` is ``1`` and passes ``z.number().int()``, so ``1.0`` is accepted here too and
  stored as the Python ``int`` 1. A bool is never an int. Integers must lie within
  ±(2**53 − 1), the range a JavaScript phone represents exactly; the Rust mirror's u64 is wider,
  but a larger value cannot survive the JS side anyway.
- **"number"** is any finite JSON number. An integral value within the safe range is stored as an
  ``int`` so that it is written back as ``50``, like ``JSON.stringify``, not ``50.0``.
- **Absent is not null.** An optional (``O``) field accepts absence but not JSON ``null`` on the wire,
  as zod's ``.optional()`` does. Python code that builds a message may still pass ``None`` for an
  absent optional field: the null check runs only under :data:`WIRE_CONTEXT`, which the codec sets.
- **Tri-state secrets** (``authToken``, ``anthropicApiKey``, ``githubPat``): absent = keep the stored
  value, ``null`` = clear it, a string = set it. Absence is the :data:`KEEP` sentinel rather than
  ``None``, so code that reads the field cannot mistake "keep" for "clear".
- **Free-form objects** (``OutputEntry.metadata``) must hold JSON values only and nest at most
  :data:`MAX_JSON_DEPTH` levels, so that every decoded model can be encoded again. Values fresh
  from the JSON parser can only be JSON values, so the decoders pass :data:`PARSED_CONTEXT` (depth
  check only) or :data:`SHALLOW_CONTEXT` (no walk: the text has too few brackets to nest that
  deep); Python-built values get the full check on encode.

Every model derives from :class:`WireModel`: frozen, unknown keys stripped (``extra="ignore"``, the
corpus' ``forwardCompatible`` rule), input values kept out of error texts (they may be secrets).
"""

from __future__ import annotations

import enum
import math
from types import UnionType
from typing import Annotated, Any, ClassVar, Final, TypeAlias, TypeVar, Union, get_args, get_origin

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainValidator,
    Strict,
    StringConstraints,
    ValidationInfo,
)
from pydantic_core import PydanticCustomError

__all__ = [
    "KEEP",
    "MAX_JSON_DEPTH",
    "MAX_SAFE_INTEGER",
    "PARSED_CONTEXT",
    "SHALLOW_CONTEXT",
    "WIRE_CONTEXT",
    "Bool",
    "Int",
    "JsonObject",
    "Keep",
    "NonEmptyStr",
    "NonNegativeInt",
    "Number",
    "Opt",
    "Percentage",
    "PositiveInt",
    "SeqRange",
    "Str",
    "TriStateNonEmptyStr",
    "TriStateStr",
    "WireModel",
]

MAX_SAFE_INTEGER: Final = 2**53 - 1
"""JavaScript's ``Number.MAX_SAFE_INTEGER``: the largest integer a phone holds exactly."""

MAX_JSON_DEPTH: Final = 64
"""How deep a free-form value (``metadata``) may nest. Real tool inputs stay far below it."""

WIRE_CONTEXT: Final[dict[str, Any]] = {"codedeck.wire": True}
"""Validation context for data that goes onto (or came off) the wire: it enables the null check."""

PARSED_CONTEXT: Final[dict[str, Any]] = {"codedeck.wire": True, "codedeck.parsed": True}
"""Like :data:`WIRE_CONTEXT`, for values fresh from the JSON parser: they can only be JSON types
(orjson turns integers past 64 bits into floats and refuses non-finite numbers), so a free-form
object needs its depth checked, not its values."""

SHALLOW_CONTEXT: Final[dict[str, Any]] = {
    "codedeck.wire": True,
    "codedeck.parsed": True,
    "codedeck.shallow": True,
}
"""Like :data:`PARSED_CONTEXT`, for a document with at most :data:`MAX_JSON_DEPTH` brackets in all:
nothing in it can nest too deep, so free-form objects need no walk at all."""

_I64_MIN: Final = -(2**63)
_U64_MAX: Final = 2**64 - 1

T = TypeVar("T")


class Keep(enum.Enum):
    """The tri-state "key absent" value: keep whatever the bridge has stored."""

    KEEP = "keep"

    def __repr__(self) -> str:
        return "KEEP"


KEEP: Final = Keep.KEEP


def _is_wire(info: ValidationInfo) -> bool:
    context = info.context
    return isinstance(context, dict) and context.get("codedeck.wire") is True


def _reject_wire_null(value: object, info: ValidationInfo) -> object:
    # zod `.optional()` accepts `undefined` but not `null`; JSON has no `undefined`, only absence.
    if value is None and _is_wire(info):
        raise PydanticCustomError("null_not_allowed", "must not be null (omit the key instead)")
    return value


def _integral_float_to_int(value: object) -> object:
    # JSON.parse("1.0") === 1 in JavaScript; anything else is left for the strict int check.
    if type(value) is float and value.is_integer():
        return int(value)
    return value


def _json_number(value: object) -> float:
    if type(value) is int:
        if -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
            return value
        return float(value)  # what a JavaScript number would hold
    if type(value) is float:
        if not math.isfinite(value):
            raise PydanticCustomError("finite_number", "expected a finite number")
        if value.is_integer() and abs(value) <= MAX_SAFE_INTEGER:
            return int(value)
        return value
    raise PydanticCustomError("number_type", "expected number")


def _percentage(value: object) -> float:
    number = _json_number(value)
    if not 0 <= number <= 100:
        raise PydanticCustomError("percentage_range", "must be between 0 and 100")
    return number


def _seq_range(value: object) -> tuple[int, int]:
    # PROTOCOL-v10-wire.md §4.1: exactly two ints [from, to], each >= 0; from <= to is not required.
    if isinstance(value, list | tuple) and len(value) == 2:
        low, high = (_integral_float_to_int(bound) for bound in value)
        if (
            type(low) is int
            and type(high) is int
            and 0 <= low <= MAX_SAFE_INTEGER
            and 0 <= high <= MAX_SAFE_INTEGER
        ):
            return (low, high)
    raise PydanticCustomError("seq_range", "must be a [from, to] pair of integers >= 0")


def _json_scalar_ok(value: object) -> bool:
    if value is None or isinstance(value, str | bool):
        return True
    if isinstance(value, int):
        return _I64_MIN <= value <= _U64_MAX  # what orjson (and so the encoder) can write
    if isinstance(value, float):
        return math.isfinite(value)
    return False


def _json_depth_error() -> PydanticCustomError:
    return PydanticCustomError(
        "json_depth", "nests deeper than {limit} levels", {"limit": MAX_JSON_DEPTH}
    )


def _json_value_error() -> PydanticCustomError:
    return PydanticCustomError(
        "json_value", "must hold JSON values only (string keys, finite numbers, 64-bit integers)"
    )


def _check_json_object(value: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
    # Iterative on purpose: a recursive walk could exhaust the stack on hostile nesting. The
    # `type(...) is` fast paths matter: every output entry's metadata goes through here.
    context = info.context
    if isinstance(context, dict) and context.get("codedeck.parsed") is True:
        if context.get("codedeck.shallow") is True:
            return value
        _check_json_depth(value)
        return value
    stack: list[tuple[dict[Any, Any] | list[Any], int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_JSON_DEPTH:
            raise _json_depth_error()
        if isinstance(node, dict):
            for key in node:
                if type(key) is not str and not isinstance(key, str):
                    raise _json_value_error()
            children = node.values()
        else:
            children = node  # type: ignore[assignment]
        for child in children:
            kind = type(child)
            if kind is str or kind is bool or child is None:
                continue
            if kind is dict or kind is list or isinstance(child, dict | list):
                stack.append((child, depth + 1))
            elif not _json_scalar_ok(child):
                raise _json_value_error()
    return value


def _check_json_depth(value: dict[str, Any]) -> None:
    stack: list[tuple[dict[Any, Any] | list[Any], int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_JSON_DEPTH:
            raise _json_depth_error()
        for child in node.values() if type(node) is dict else node:
            kind = type(child)
            if kind is dict or kind is list:
                stack.append((child, depth + 1))


def _tri_state(min_length: int) -> Any:
    def validate(value: object) -> str | Keep | None:
        if value is None or value is KEEP:
            return value
        if isinstance(value, str):
            if len(value) < min_length:
                raise PydanticCustomError("string_too_short", "must not be empty")
            return value
        raise PydanticCustomError("tri_state_type", "expected string or null")

    return PlainValidator(validate)


Str: TypeAlias = Annotated[str, Strict()]
NonEmptyStr: TypeAlias = Annotated[str, Strict(), StringConstraints(min_length=1)]
Bool: TypeAlias = Annotated[bool, Strict()]
# The before-validator comes last so that it wraps the int schema: the bounds then stay native
# constraints of the int validator instead of Python calls after a function validator.
Int: TypeAlias = Annotated[
    int,
    Strict(),
    Field(ge=-MAX_SAFE_INTEGER, le=MAX_SAFE_INTEGER),
    BeforeValidator(_integral_float_to_int),
]
NonNegativeInt: TypeAlias = Annotated[
    int, Strict(), Field(ge=0, le=MAX_SAFE_INTEGER), BeforeValidator(_integral_float_to_int)
]
PositiveInt: TypeAlias = Annotated[
    int, Strict(), Field(gt=0, le=MAX_SAFE_INTEGER), BeforeValidator(_integral_float_to_int)
]
Number: TypeAlias = Annotated[float, PlainValidator(_json_number)]
Percentage: TypeAlias = Annotated[float, PlainValidator(_percentage)]
SeqRange: TypeAlias = Annotated[tuple[int, int], PlainValidator(_seq_range)]
"""An inclusive ``[from, to]`` pair of transcript seqs; a ``tuple`` in Python, an array on the wire."""
JsonObject: TypeAlias = Annotated[dict[str, Any], Strict(), AfterValidator(_check_json_object)]
TriStateStr: TypeAlias = Annotated[str | Keep | None, _tri_state(0)]
TriStateNonEmptyStr: TypeAlias = Annotated[str | Keep | None, _tri_state(1)]
Opt: TypeAlias = Annotated[T | None, BeforeValidator(_reject_wire_null)]
"""An ``O`` field: absent (``None`` in Python) or a valid ``T``, never JSON ``null`` on the wire."""

# How the codec writes a field (PROTOCOL-v10-wire.md §2.5).
ALWAYS: Final = 0  # R and R,null fields: always written, `None` as null
OMIT_NONE: Final = 1  # O fields: absent when None
OMIT_KEEP: Final = 2  # tri-state fields: absent when KEEP, null when None

# What a field holds, so that encoding recurses only where models live.
PLAIN: Final = 0
MODEL: Final = 1
MODEL_LIST: Final = 2

WirePlan: TypeAlias = tuple[tuple[str, int, int], ...]


def _is_model(annotation: object) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _shape(annotation: object) -> int:
    if _is_model(annotation):
        return MODEL
    origin = get_origin(annotation)
    args = get_args(annotation)
    if origin is list and args and _is_model(args[0]):
        return MODEL_LIST
    if origin in (Union, UnionType):
        # An optional field (``Opt[list[Model]]``, ``Model | None``) holds what its member does.
        shapes = {_shape(arg) for arg in args if arg is not type(None)}
        if MODEL_LIST in shapes:
            return MODEL_LIST
        if MODEL in shapes:
            return MODEL
    return PLAIN


class WireModel(BaseModel):
    """Base of every v10 model: frozen, strips unknown keys, never echoes input in errors.

    ``__wire_plan__`` (computed per subclass) lists each field with its write mode and shape in wire
    key order: ``type`` first, then the declared fields, then the names in ``__wire_trailing__``
    (the command envelope's ``v`` and ``caps``).
    """

    model_config = ConfigDict(
        frozen=True, extra="ignore", hide_input_in_errors=True, defer_build=True
    )

    __wire_trailing__: ClassVar[tuple[str, ...]] = ()
    __wire_plan__: ClassVar[WirePlan] = ()

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        fields = cls.model_fields
        trailing = [name for name in cls.__wire_trailing__ if name in fields]
        order = [name for name in fields if name == "type"]
        order += [name for name in fields if name != "type" and name not in trailing]
        order += trailing
        plan: list[tuple[str, int, int]] = []
        for name in order:
            info = fields[name]
            if info.is_required():
                mode = ALWAYS
            elif info.default is KEEP:
                mode = OMIT_KEEP
            else:
                mode = OMIT_NONE
            plan.append((name, mode, _shape(info.annotation)))
        cls.__wire_plan__ = tuple(plan)
