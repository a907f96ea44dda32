"""The wire codec: JSON text ⇄ typed v10 messages, with the decode rules of PROTOCOL-v10-wire.md §2.

Decoding (``decode_phone_to_bridge`` / ``decode_bridge_to_phone``):

1. The raw plaintext (``str`` or UTF-8 ``bytes``, at most :data:`MAX_MESSAGE_BYTES`) is parsed as
   JSON. Anything the parser refuses (bad UTF-8, ``NaN``, a lone surrogate escape, a number that
   overflows a double, nesting past 1024 levels) is ``invalid JSON: <parser message>``.
2. The value must be an object with a string ``type`` naming a member of the union.
3. The members for that type are tried in order (only ``upload-image`` has two: Blossom, then
   chunked); the first that validates wins. Unknown keys are stripped.
4. Any failure raises :class:`DecodeError` whose text is
   ``schema mismatch for type "<type>": <path> <message>`` for the first issue in wire key order.
   ``<type>`` is ``<missing>`` when there is no string ``type``; ``<path>`` is dotted
   (``sessions.0.id``), ``(root)`` for the value itself. Input values never appear in the text:
   they may be secrets.

Nothing but :class:`DecodeError` ever escapes a decoder, whatever the input.

Encoding (:func:`encode`) validates first (egress validation, with the same schema), then writes
compact JSON in wire key order: optional fields are absent rather than ``null``, declared-nullable
fields are always written, a tri-state field is absent for ``KEEP`` and ``null`` for ``None``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final, TypeVar, cast, get_args

import orjson
from pydantic import ValidationError
from pydantic_core import ErrorDetails

from .commands import PhoneToBridge
from .messages import BridgeToPhone
from .primitives import (
    KEEP,
    MAX_JSON_DEPTH,
    MODEL,
    OMIT_NONE,
    PARSED_CONTEXT,
    PLAIN,
    SHALLOW_CONTEXT,
    WIRE_CONTEXT,
    WireModel,
)

__all__ = [
    "BRIDGE_TO_PHONE_TYPES",
    "MAX_MESSAGE_BYTES",
    "PHONE_TO_BRIDGE_TYPES",
    "DecodeError",
    "EncodeError",
    "ProtocolError",
    "decode_as",
    "decode_bridge_to_phone",
    "decode_phone_to_bridge",
    "encode",
]

MAX_MESSAGE_BYTES: Final = 16 * 1024 * 1024
"""Largest plaintext a decoder accepts (UTF-8 bytes). A reassembled ``chunk`` group is capped at
8 MiB by the assembler, so every legitimate message fits with room to spare."""

_TYPE_DISPLAY_LIMIT: Final = 64

M = TypeVar("M", bound=WireModel)


class ProtocolError(ValueError):
    """A message that does not satisfy the v10 schema.

    Attributes:
        message_type: The message's ``type`` when it had a string one, else None.
        path: Dotted path of the offending value, ``(root)`` for the value itself, or None for a
            JSON-level failure.
    """

    def __init__(
        self, text: str, *, message_type: str | None = None, path: str | None = None
    ) -> None:
        super().__init__(text)
        self.message_type = message_type
        self.path = path


class DecodeError(ProtocolError):
    """An inbound payload is not valid JSON or not a valid message: log it and drop it."""


class EncodeError(ProtocolError):
    """An outbound message failed egress validation or could not be serialized: a local bug."""


def _registry(union: object) -> dict[str, tuple[type[WireModel], ...]]:
    registry: dict[str, tuple[type[WireModel], ...]] = {}
    for member in get_args(union):
        literal = member.model_fields["type"].default
        registry[literal] = (*registry.get(literal, ()), member)
    return registry


PHONE_TO_BRIDGE_TYPES: Final = _registry(PhoneToBridge)
"""``type`` literal → the model class(es) of that phone → bridge command, in resolution order."""

BRIDGE_TO_PHONE_TYPES: Final = _registry(BridgeToPhone)
"""``type`` literal → the model class of that bridge → phone message."""

_LABELS: Final = {
    cls: literal
    for registry in (PHONE_TO_BRIDGE_TYPES, BRIDGE_TO_PHONE_TYPES)
    for literal, classes in registry.items()
    for cls in classes
}


def _display_type(message_type: str | None) -> str:
    if message_type is None:
        return "<missing>"
    shown = json.dumps(message_type[:_TYPE_DISPLAY_LIMIT])[1:-1]  # escapes quotes and controls
    return shown + ("..." if len(message_type) > _TYPE_DISPLAY_LIMIT else "")


def _mismatch(
    error_cls: type[ProtocolError], message_type: str | None, path: str, message: str
) -> ProtocolError:
    text = f'schema mismatch for type "{_display_type(message_type)}": {path} {message}'
    return error_cls(text, message_type=message_type, path=path)


def _describe(error: ErrorDetails) -> str:
    """Render one pydantic issue in this protocol's words (documented in PROTOCOL.md)."""
    kind = error["type"]
    ctx = error.get("ctx") or {}
    if kind == "missing":
        return "is required"
    if kind == "string_type":
        return "expected string"
    if kind == "bool_type":
        return "expected boolean"
    if kind in ("int_type", "int_parsing", "int_from_float"):
        return "expected integer"
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        return "expected object"
    if kind in ("list_type", "tuple_type"):
        return "expected array"
    if kind == "string_too_short":
        return "must not be empty"
    if kind == "literal_error":
        return f"must be one of {ctx.get('expected', '?')}"
    if kind == "greater_than_equal":
        return f"must be >= {ctx.get('ge')}"
    if kind == "greater_than":
        return f"must be > {ctx.get('gt')}"
    if kind == "less_than_equal":
        return f"must be <= {ctx.get('le')}"
    if kind == "too_short":
        count = ctx.get("min_length")
        return f"must have at least {count} item{'s' if count != 1 else ''}"
    message = error["msg"]
    return message.removeprefix("Value error, ")


def _path(loc: tuple[int | str, ...]) -> str:
    return ".".join(str(part) for part in loc) if loc else "(root)"


def _first_issue(cls: type[WireModel], exc: ValidationError) -> ErrorDetails:
    # pydantic reports in declaration order; the wire order puts a command's `v`/`caps` last.
    order = {name: index for index, (name, _, _) in enumerate(cls.__wire_plan__)}
    errors = exc.errors(include_url=False, include_input=False)
    return min(
        errors,
        key=lambda error: order.get(str(error["loc"][0]), len(order)) if error["loc"] else -1,
    )


def _validate(
    classes: tuple[type[WireModel], ...],
    obj: dict[str, Any],
    message_type: str,
    error_cls: type[ProtocolError],
    context: dict[str, Any] = WIRE_CONTEXT,
) -> WireModel:
    failures: list[tuple[type[WireModel], ValidationError]] = []
    for cls in classes:
        try:
            model = cls.__pydantic_validator__.validate_python(obj, context=context)
        except ValidationError as exc:
            failures.append((cls, exc))
        else:
            return cast(WireModel, model)
    cls, failure = failures[0]
    if len(failures) > 1:
        # Report the member the payload resembles most (upload-image: Blossom unless it carries
        # chunked-only keys); ties go to the earlier member.
        cls, failure = max(
            failures, key=lambda item: sum(key in obj for key in item[0].model_fields)
        )
    issue = _first_issue(cls, failure)
    raise _mismatch(error_cls, message_type, _path(issue["loc"]), _describe(issue))


def _parse(raw: object) -> object:
    if isinstance(raw, str):
        oversized = len(raw) > MAX_MESSAGE_BYTES or (
            len(raw) * 4 > MAX_MESSAGE_BYTES
            and len(raw.encode("utf-8", "surrogatepass")) > MAX_MESSAGE_BYTES
        )
    elif isinstance(raw, bytes | bytearray):
        oversized = len(raw) > MAX_MESSAGE_BYTES
    elif isinstance(raw, memoryview):
        oversized = raw.nbytes > MAX_MESSAGE_BYTES
    else:
        raise DecodeError(f"invalid JSON: expected str or bytes, got {type(raw).__name__}")
    if oversized:
        raise DecodeError(f"invalid JSON: input larger than {MAX_MESSAGE_BYTES} bytes")
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise DecodeError(f"invalid JSON: {exc}") from None


def _object(raw: object) -> tuple[dict[str, Any], dict[str, Any]]:
    """Parse ``raw`` into an object, with the validation context its provenance allows."""
    obj = _parse(raw)
    if not isinstance(obj, dict):
        raise _mismatch(DecodeError, None, "(root)", "expected object")
    return obj, _context_for(raw)


def _context_for(raw: object) -> dict[str, Any]:
    # With at most MAX_JSON_DEPTH brackets in the whole text nothing can nest too deep: skip the
    # free-form depth walk (a C-speed count is much cheaper than a Python walk).
    if isinstance(raw, str):
        brackets = raw.count("{") + raw.count("[")
    elif isinstance(raw, bytes | bytearray):
        brackets = raw.count(b"{") + raw.count(b"[")
    else:
        return PARSED_CONTEXT
    return SHALLOW_CONTEXT if brackets <= MAX_JSON_DEPTH else PARSED_CONTEXT


def _message_type(obj: dict[str, Any], error_cls: type[ProtocolError]) -> str:
    if "type" not in obj:
        raise _mismatch(error_cls, None, "type", "is required")
    message_type = obj["type"]
    if not isinstance(message_type, str):
        raise _mismatch(error_cls, None, "type", "expected string")
    return message_type


def _decode(raw: object, registry: Mapping[str, tuple[type[WireModel], ...]]) -> WireModel:
    obj, context = _object(raw)
    message_type = _message_type(obj, DecodeError)
    classes = registry.get(message_type)
    if classes is None:
        raise _mismatch(DecodeError, message_type, "type", "unknown message type")
    return _validate(classes, obj, message_type, DecodeError, context)


def decode_phone_to_bridge(raw: str | bytes) -> PhoneToBridge:
    """Decode a phone → bridge command (the NIP-44 plaintext of a 4515 event).

    Args:
        raw: The plaintext, as text or UTF-8 bytes.

    Returns:
        The typed command.

    Raises:
        DecodeError: The payload is not valid JSON or not a valid v10 command.
    """
    return cast(PhoneToBridge, _decode(raw, PHONE_TO_BRIDGE_TYPES))


def decode_bridge_to_phone(raw: str | bytes) -> BridgeToPhone:
    """Decode a bridge → phone message (after any ``chunk`` reassembly).

    Args:
        raw: The plaintext, as text or UTF-8 bytes.

    Returns:
        The typed message.

    Raises:
        DecodeError: The payload is not valid JSON or not a valid v10 message.
    """
    return cast(BridgeToPhone, _decode(raw, BRIDGE_TO_PHONE_TYPES))


def decode_as(model: type[M], raw: str | bytes) -> M:
    """Decode JSON text as one given model (e.g. an ``OutputEntry`` line of a transcript file).

    The same rules as the message decoders apply; a message class also requires its ``type``.

    Raises:
        DecodeError: The payload is not valid JSON or does not fit ``model``.
    """
    obj, context = _object(raw)
    label = _LABELS.get(model)
    if label is not None and _message_type(obj, DecodeError) != label:
        raise _mismatch(DecodeError, obj["type"], "type", f'expected "{label}"')
    return cast(M, _validate((model,), obj, label or model.__name__, DecodeError, context))


def _wire_dict(model: WireModel) -> dict[str, Any]:
    """The wire form of a model: plain JSON values in wire key order, optionals omitted.

    Nested lists and dicts are shared with the model, not copied. A field missing from the
    instance (only possible through ``model_construct``) raises KeyError.
    """
    out: dict[str, Any] = {}
    values = model.__dict__
    for name, mode, shape in model.__wire_plan__:
        value = values[name]
        if value is None:
            if mode != OMIT_NONE:  # R,null and tri-state fields write null
                out[name] = None
        elif shape == PLAIN:
            if value is not KEEP:
                out[name] = value
        elif shape == MODEL:
            out[name] = _wire_dict(value) if isinstance(value, WireModel) else value
        else:
            out[name] = [
                _wire_dict(item) if isinstance(item, WireModel) else item for item in value
            ]
    return out


def encode(message: WireModel | Mapping[str, Any]) -> str:
    """Validate a message and write it as compact JSON in wire key order.

    Args:
        message: A protocol model (any message or shared type), or a plain mapping with a ``type``
            naming a message of either direction.

    Returns:
        The JSON text: the NIP-44 plaintext (before any ``chunk`` fragmentation).

    Raises:
        EncodeError: The message fails egress validation (e.g. an insecure provider ``baseUrl``,
            a non-JSON value in ``metadata``) or cannot be serialized.
    """
    if isinstance(message, WireModel):
        cls = type(message)
        try:
            data = _wire_dict(message)
        except KeyError as exc:  # a model_construct() instance without a required field
            label = _LABELS.get(cls, cls.__name__)
            raise _mismatch(EncodeError, label, str(exc.args[0]), "is required") from None
        try:
            cls.__pydantic_validator__.validate_python(data, context=WIRE_CONTEXT)
        except ValidationError as exc:
            issue = _first_issue(cls, exc)
            label = _LABELS.get(cls, cls.__name__)
            raise _mismatch(EncodeError, label, _path(issue["loc"]), _describe(issue)) from None
    elif isinstance(message, Mapping):
        obj = dict(message)
        message_type = _message_type(obj, EncodeError)
        classes = PHONE_TO_BRIDGE_TYPES.get(message_type) or BRIDGE_TO_PHONE_TYPES.get(message_type)
        if classes is None:
            raise _mismatch(EncodeError, message_type, "type", "unknown message type")
        data = _wire_dict(_validate(classes, obj, message_type, EncodeError))
    else:
        raise EncodeError(f"cannot encode {type(message).__name__}: expected a model or a mapping")
    try:
        return orjson.dumps(data).decode("utf-8")
    except orjson.JSONEncodeError as exc:
        raise EncodeError(f"cannot serialize: {exc}") from None
