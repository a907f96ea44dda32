"""Fuzzing the whole ingest path of the engine: signed events in, effects out.

Whatever a relay delivers, the engine never raises; bad input (anything that does not decode into
a v10 command, and anything refused before decoding whatever it says) yields only ``Dropped``
and the dedup record of those events: no runner effect, no publish, no state change
(:func:`~tests.fuzz.engine_harness.check_ingest`). Valid input found by chance is allowed its
effects, but still must not raise and must stay bounded (huge ``haveRanges``).

The seed corpus (``corpus/ingest/*.json``) is replayed as explicit cases first.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bridge.engine.effects import Commit, Effect, Publish, SendSyncChunk
from bridge.protocol import PHONE_TO_BRIDGE_TYPES, InputCommand, encode
from bridge.protocol.chunking import split
from bridge.protocol.kinds import COMMAND_KIND, command_tags
from tests.fuzz.corpus import CorpusCase, ingest_cases
from tests.fuzz.engine_harness import (
    NOW,
    STRANGER,
    Fed,
    check_ingest,
    make_engine,
    seal,
)

FUZZ = settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
FIELDS = sorted(
    {
        "sessionId", "text", "inputId", "haveRanges", "range", "syncId", "mode", "level",
        "model", "cwd", "path", "root", "requestId", "token", "npub", "pubkeyHex", "label",
        "caps", "v", "allow", "modifier", "key", "config", "profile", "chunkIndex",
        "totalChunks", "uploadId", "base64Data", "url", "hash", "iv", "sizeBytes",
    }
)  # fmt: skip
TYPES = [*sorted(PHONE_TO_BRIDGE_TYPES), "chunk", "teleport", "", "INPUT", "sync_request"]
SESSION = "SESSION"  # replaced by the live session id

text = st.text(st.characters(codec="utf-8"), max_size=60)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    text,
    st.just(SESSION),
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(text, inner, max_size=4),
    max_leaves=12,
)
command_like = st.fixed_dictionaries(
    {"type": st.sampled_from(TYPES)},
    optional={name: values for name in FIELDS},
)


def _fill(obj: Any, session: str) -> Any:
    if obj == SESSION:
        return session
    if isinstance(obj, list):
        return [_fill(o, session) for o in obj]
    if isinstance(obj, dict):
        return {k: _fill(v, session) for k, v in obj.items()}
    return obj


def _dumps(obj: Any, session: str) -> str:
    # The stdlib, not orjson: it writes integers past 64 bits, as a buggy phone may.
    return json.dumps(_fill(obj, session), ensure_ascii=False, separators=(",", ":"))


def _plain(payload: str) -> str:
    """NIP-44 takes 1..65535 UTF-8 bytes: the fuzzer's empty text becomes one space."""
    return payload if payload.encode("utf-8") else " "


@st.composite
def payloads(draw: st.DrawFn) -> Any:
    """A plaintext builder (called with the live session id): anything a buggy phone may send."""
    kind = draw(st.integers(0, 5))
    if kind == 0:
        raw = draw(st.text(st.characters(codec="utf-8"), min_size=1, max_size=300))
        return lambda _session: raw
    if kind == 1:
        obj = draw(command_like)
        return lambda session: _dumps(obj, session)
    if kind == 2:
        value: Any = draw(values)
        return lambda session: _dumps(value, session)
    if kind == 3:  # a real command, cut short or with a byte flipped
        body = draw(text)
        cut = draw(st.integers(0, 200))
        flip = draw(st.integers(0, 200))

        def broken(session: str) -> str:
            encoded = encode(InputCommand(sessionId=session, text=body, inputId="in-1"))
            if flip < len(encoded) and cut % 2:
                return encoded[:flip] + "\x7f" + encoded[flip + 1 :]
            return encoded[: max(1, min(cut, len(encoded) - 1))]

        return broken
    if kind == 4:  # oversized: up to the NIP-44 limit, in a field or as junk
        size = draw(st.integers(40_000, 65_000))
        field = draw(st.sampled_from(["text", "sessionId", "haveRanges", "junk"]))
        return lambda session: _dumps(
            {"type": "input", "sessionId": session, field: "a" * size}, session
        )[:65_000]
    depth = draw(st.integers(100, 5_000))  # nesting past any parser's comfort
    return lambda _session: "[" * depth + "]" * depth


@FUZZ
@given(build=payloads(), age=st.integers(-200, 4_000))
def test_payloads_from_the_paired_phone(build: Any, age: int) -> None:
    engine, session = make_engine()
    plaintext = _plain(build(session))
    event = seal(plaintext, created_at=int(NOW) - age)
    check_ingest(engine, [Fed(event, plaintext)])


REFUSALS = ["wrong-key", "stranger", "elsewhere", "no-p", "kind", "not-nip44"]


@FUZZ
@given(refusal=st.sampled_from(REFUSALS), build=payloads(), valid=st.booleans())
def test_refused_events_do_nothing_even_when_they_say_something_valid(
    refusal: str, build: Any, valid: bool
) -> None:
    engine, session = make_engine()
    plaintext = (
        encode(InputCommand(sessionId=session, text="run me", inputId="in-x"))
        if valid
        else _plain(build(session))
    )
    now = int(NOW)
    other = STRANGER.public_hex
    event = {
        "wrong-key": lambda: seal(plaintext, key_of=STRANGER),
        "stranger": lambda: seal(plaintext, author=STRANGER),
        "elsewhere": lambda: seal(plaintext, tags=command_tags(other, now)),
        "no-p": lambda: seal(plaintext, tags=[["expiration", str(now + 3600)]]),
        "kind": lambda: seal(plaintext, kind=4516 if valid else 1),
        "not-nip44": lambda: seal(plaintext, raw_content=True),
    }[refusal]()
    check_ingest(engine, [Fed(event, None, refused=True)])


def _envelope(cid: Any, index: Any, count: Any, part: Any) -> str:
    body = {"type": "chunk", "cid": cid, "i": index, "n": count, "part": part}
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"))


lying_numbers = st.one_of(
    st.integers(-3, 5),
    st.integers(2, 2**62),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([2**53, 2**53 + 1, 2**64, "2", None, True]),
)


@st.composite
def fragment_runs(draw: st.DrawFn) -> Any:
    """Fragments: lying ``n``, bad indexes, shared cids, parts joining into junk (or a command)."""
    cids = draw(st.lists(st.sampled_from(["a", "b", "", 7, None]), min_size=1, max_size=3))
    raw = draw(
        st.lists(
            st.tuples(st.sampled_from(cids), lying_numbers, lying_numbers, text),
            min_size=1,
            max_size=8,
        )
    )
    honest = draw(st.booleans())
    tail = draw(st.integers(0, 2))

    def build(session: str) -> list[str]:
        texts = [_envelope(*fields) for fields in raw]
        if honest:  # a real command in real fragments, minus `tail` of them
            command = encode(InputCommand(sessionId=session, text="x" * 50_000, inputId="in-f"))
            parts = split(command, cid="c" * 32)
            texts += parts[: len(parts) - tail]
        return texts

    return build


@FUZZ
@given(build=fragment_runs())
def test_fragments_with_lying_counts(build: Any) -> None:
    engine, session = make_engine()
    fed = [Fed(seal(_plain(t)), _plain(t)) for t in build(session)]
    check_ingest(engine, fed)


ranges = st.lists(
    st.one_of(
        st.tuples(st.integers(-5, 2**63), st.integers(-5, 2**63)).map(list),
        st.lists(st.integers(0, 10), max_size=3),
        st.just([1, 10**30]),
    ),
    max_size=40,
)


@FUZZ
@given(have=ranges, repeat=st.integers(1, 150), known=st.booleans())
def test_huge_have_ranges(have: list[Any], repeat: int, known: bool) -> None:
    engine, session = make_engine()
    body = {
        "type": "sync-request",
        "sessionId": session if known else "nope",
        "haveRanges": (have * repeat)[:2_000],
    }
    plaintext = json.dumps(body, separators=(",", ":"))
    effects = check_ingest(engine, [Fed(seal(plaintext), plaintext)])
    # Valid or not, the answer stays small: no effect per range asked for.
    assert len(effects) <= 8
    assert sum(isinstance(e, SendSyncChunk) for e in effects) <= 4


@FUZZ
@given(build=payloads())
def test_strangers_during_a_pairing_window(build: Any) -> None:
    from bridge.engine.inputs import PairingWindowRequested

    engine, session = make_engine()
    engine.handle(PairingWindowRequested("t" * 32, 600.0), NOW)
    plaintext = _plain(build(session))
    if '"pair-request"' in plaintext:  # a refused pair-request is answered by design (nack)
        plaintext = plaintext.replace('"pair-request"', '"pair-requesT"')
    check_ingest(engine, [Fed(seal(plaintext, author=STRANGER), plaintext)])


# --- the seed corpus ----------------------------------------------------------------------------


def _publishes(effects: list[Effect]) -> int:
    return sum(
        len(e.outbox) if isinstance(e, Commit) else int(isinstance(e, Publish)) for e in effects
    )


@pytest.mark.parametrize("case", ingest_cases(), ids=lambda c: c.name)
def test_corpus(case: CorpusCase) -> None:
    engine, session = make_engine()
    fed = case.build(session)
    effects = check_ingest(engine, fed)
    if case.expect == "accepted":
        assert _publishes(effects) >= 1, effects
    else:
        assert _publishes(effects) == 0
        assert all(f.event.kind == COMMAND_KIND or f.refused for f in fed)
