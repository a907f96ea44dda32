"""The project's v10 conformance corpus (PROTOCOL.md §17, PROTOCOL-v10-wire.md §14).

The four checks of the spec run over ``corpus.json``, plus the completeness rule, plus coverage
checks that keep the corpus honest as the schema grows: every enum value, every optional field both
present and absent, every nullable field both null and not, every tri-state field in all three
states.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any, get_args

import orjson
import pytest

from bridge.protocol import (
    BRIDGE_TO_PHONE_TYPES,
    KEEP,
    PHONE_TO_BRIDGE_TYPES,
    DecodeError,
    UploadImageBlossomCommand,
    UploadImageChunkedCommand,
    WireModel,
    decode_bridge_to_phone,
    decode_phone_to_bridge,
    encode,
    enums,
)

CORPUS = json.loads((Path(__file__).parent / "corpus.json").read_text(encoding="utf-8"))
DECODERS = {"p2b": decode_phone_to_bridge, "b2p": decode_bridge_to_phone}
SECTIONS = {"p2b": "phoneToBridge", "b2p": "bridgeToPhone"}
REGISTRIES = {"p2b": PHONE_TO_BRIDGE_TYPES, "b2p": BRIDGE_TO_PHONE_TYPES}


def _raw(message: Any) -> str:
    return json.dumps(message, ensure_ascii=False)


def _cases(direction: str, key: str) -> list[Any]:
    return [
        pytest.param(direction, index, item, id=f"{direction}-{index}-{_label(item)}")
        for index, item in enumerate(CORPUS[SECTIONS[direction]][key])
    ]


def _label(item: Any) -> str:
    if isinstance(item, dict) and isinstance(item.get("type"), str):
        return str(item["type"])
    return type(item).__name__


VALID = _cases("p2b", "valid") + _cases("b2p", "valid")
REJECTED = _cases("p2b", "rejected") + _cases("b2p", "rejected")


@pytest.mark.parametrize(("direction", "index", "message"), VALID)
def test_valid_fixture_decodes_and_round_trips(direction: str, index: int, message: Any) -> None:
    decode = DECODERS[direction]
    decoded = decode(_raw(message))
    again = decode(encode(decoded))
    assert again == decoded
    assert type(again) is type(decoded)


@pytest.mark.parametrize(("direction", "index", "message"), REJECTED)
def test_rejected_fixture_fails_with_its_error(direction: str, index: int, message: Any) -> None:
    expected = CORPUS[SECTIONS[direction]]["rejectedErrors"][index]
    with pytest.raises(DecodeError) as caught:
        DECODERS[direction](_raw(message))
    assert str(caught.value) == expected


def test_every_rejected_fixture_has_an_expected_error() -> None:
    for section in SECTIONS.values():
        assert len(CORPUS[section]["rejected"]) == len(CORPUS[section]["rejectedErrors"])
        assert len(CORPUS[section]["rejected"]) >= 25


def _assert_known_keys(model: WireModel, wire: dict[str, Any]) -> None:
    fields = type(model).model_fields
    assert set(wire) <= set(fields), f"{type(model).__name__} re-emitted {set(wire) - set(fields)}"
    for name, value in wire.items():
        attribute = getattr(model, name)
        if isinstance(attribute, WireModel):
            _assert_known_keys(attribute, value)
        elif isinstance(attribute, list):
            for item, item_wire in zip(attribute, value, strict=True):
                if isinstance(item, WireModel):
                    _assert_known_keys(item, item_wire)


@pytest.mark.parametrize(
    "item",
    CORPUS["forwardCompatible"],
    ids=[
        f"{item['dir']}-{i}-{item['msg']['type']}"
        for i, item in enumerate(CORPUS["forwardCompatible"])
    ],
)
def test_forward_compatible_fixture_decodes_and_extras_are_stripped(item: dict[str, Any]) -> None:
    decode = DECODERS[item["dir"]]
    decoded = decode(_raw(item["msg"]))
    text = encode(decoded)
    _assert_known_keys(decoded, orjson.loads(text))
    assert decode(text) == decoded
    assert "never-echoed" not in text


@pytest.mark.parametrize("direction", ["p2b", "b2p"])
def test_valid_fixtures_cover_exactly_the_union(direction: str) -> None:
    types = {message["type"] for message in CORPUS[SECTIONS[direction]]["valid"]}
    assert types == set(REGISTRIES[direction])


def test_both_upload_image_shapes_are_covered() -> None:
    decoded = [decode_phone_to_bridge(_raw(m)) for m in CORPUS["phoneToBridge"]["valid"]]
    classes = {type(message) for message in decoded}
    assert {UploadImageBlossomCommand, UploadImageChunkedCommand} <= classes


# Which wire keys carry which vocabulary, to check that every enum value appears in a fixture.
ENUM_KEYS: dict[str, tuple[tuple[str, ...], set[str]]] = {
    "PERMISSION_MODES": (enums.PERMISSION_MODES, {"mode", "permissionMode"}),
    "EFFORT_LEVELS": (enums.EFFORT_LEVELS, {"level", "effortLevel", "defaultEffort"}),
    "SESSION_STATES": (enums.SESSION_STATES, {"state"}),
    "OUTPUT_ENTRY_TYPES": (enums.OUTPUT_ENTRY_TYPES, {"entryType"}),
    "DIFF_LINE_TYPES": (enums.DIFF_LINE_TYPES, {"type"}),
    "BRIDGE_HOST_KINDS": (enums.BRIDGE_HOST_KINDS, {"host"}),
    "DEVICE_ROLES": (enums.DEVICE_ROLES, {"role"}),
    "APP_UNDER_TEST_VALUES": (enums.APP_UNDER_TEST_VALUES, {"appUnderTest"}),
    "SESSION_BACKENDS": (enums.SESSION_BACKENDS, {"backend"}),
    "INPUT_FAILED_REASONS": (enums.INPUT_FAILED_REASONS, {"reason"}),
    "PAIR_ACK_REASONS": (enums.PAIR_ACK_REASONS, {"reason"}),
    "PERMISSION_MODIFIERS": (enums.PERMISSION_MODIFIERS, {"modifier"}),
    "KEYPRESS_CONTEXTS": (enums.KEYPRESS_CONTEXTS, {"context"}),
}


def _key_values(value: Any, out: dict[str, set[Any]]) -> None:
    if isinstance(value, dict):
        for key, child in value.items():
            if isinstance(child, str):
                out[key].add(child)
            _key_values(child, out)
    elif isinstance(value, list):
        for child in value:
            _key_values(child, out)


@pytest.mark.parametrize("name", sorted(ENUM_KEYS))
def test_every_enum_value_appears_in_a_valid_fixture(name: str) -> None:
    values, keys = ENUM_KEYS[name]
    seen: dict[str, set[Any]] = defaultdict(set)
    for section in SECTIONS.values():
        _key_values(CORPUS[section]["valid"], seen)
    found = set().union(*(seen[key] for key in keys))
    assert set(values) <= found, f"{name}: missing {set(values) - found}"


def _model_classes(cls: type[WireModel], out: set[type[WireModel]]) -> None:
    if cls in out:
        return
    out.add(cls)
    for info in cls.model_fields.values():
        stack: list[Any] = [info.annotation]
        while stack:
            annotation = stack.pop()
            if isinstance(annotation, type) and issubclass(annotation, WireModel):
                _model_classes(annotation, out)
            stack.extend(get_args(annotation))


def _owner(cls: type[WireModel], name: str) -> str:
    """The class that declares a field: the command envelope's `v`/`caps` are covered once."""
    for klass in cls.__mro__:
        if name in getattr(klass, "__annotations__", {}):
            return klass.__name__
    return cls.__name__  # pragma: no cover


def _observe(model: WireModel, seen: dict[tuple[str, str], set[str]]) -> None:
    cls = type(model)
    for name in cls.model_fields:
        value = getattr(model, name)
        state = "keep" if value is KEEP else "none" if value is None else "value"
        seen[(_owner(cls, name), name)].add(state)
        children = value if isinstance(value, list) else [value]
        for child in children:
            if isinstance(child, WireModel):
                _observe(child, seen)


def test_optional_nullable_and_tri_state_fields_are_covered_both_ways() -> None:
    seen: dict[tuple[str, str], set[str]] = defaultdict(set)
    for direction, section in SECTIONS.items():
        for message in CORPUS[section]["valid"]:
            _observe(DECODERS[direction](_raw(message)), seen)
    universe: set[type[WireModel]] = set()
    for registry in REGISTRIES.values():
        for classes in registry.values():
            for cls in classes:
                _model_classes(cls, universe)
    gaps = []
    for cls in sorted(universe, key=lambda c: c.__name__):
        for name, info in cls.model_fields.items():
            states = seen.get((_owner(cls, name), name), set())
            if info.default is KEEP:
                wanted = {"keep", "none", "value"}
            elif not info.is_required() or type(None) in get_args(info.annotation):
                wanted = {"none", "value"}  # optional: absent and present; nullable: null and not
            else:
                wanted = {"value"}
            if name == "type" and not info.is_required():
                wanted = {"value"}
            if not wanted <= states:
                gaps.append(f"{cls.__name__}.{name}: saw {sorted(states)}, want {sorted(wanted)}")
    assert not gaps, "\n".join(gaps)
