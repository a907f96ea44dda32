"""An engine to fuzz, events to feed it, and the check that bad input changed nothing.

The engine is the real one with real crypto (as ``tests/engine/test_core.py`` builds it): one
paired phone, one session whose runner is up, a fixed clock. Events are really signed and, unless
a case says otherwise, really NIP-44 encrypted to the bridge, because the pool hands the engine
only verified events: the fuzzing starts where a hostile relay or a buggy phone can reach.

:func:`check_ingest` feeds events and applies the rule of the issue: the engine never raises; for
input that is bad (it does not decode into a command, or is refused before decoding: wrong key,
wrong kind, addressed elsewhere, a stranger's), it produces nothing but ``Dropped`` and commits of
``MarkProcessed`` for those very events, and its state is unchanged except for that dedup record.
Whether input is bad is decided independently of the engine: by decoding the plaintext (after
running a reference :class:`~bridge.protocol.Assembler` over fragments) with the v10 codec.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from bridge.engine.core import Engine, EngineConfig, EngineState
from bridge.engine.effects import Commit, Dropped, Effect, MarkProcessed, PairedPhone, StartRunner
from bridge.engine.inputs import AgentReady, CommandEventReceived
from bridge.nostr.event import VerifiedEvent, sign_event
from bridge.nostr.keys import Keypair
from bridge.nostr.nip44 import ConversationKeyCache, conversation_key, decrypt, encrypt
from bridge.protocol import Assembler, CreateSessionCommand, DecodeError, decode_phone_to_bridge
from bridge.protocol.chunking import MAX_BUFFERED_BYTES, MAX_OPEN_GROUPS
from bridge.protocol.codec import encode
from bridge.protocol.kinds import COMMAND_KIND, command_tags

__all__ = [
    "BRIDGE",
    "NOW",
    "PHONE",
    "ROOT",
    "STRANGER",
    "Fed",
    "bad_plaintexts",
    "check_ingest",
    "make_engine",
    "seal",
    "snapshot",
]

BRIDGE = Keypair.from_secret("11" * 32)
PHONE = Keypair.from_secret("22" * 32)
STRANGER = Keypair.from_secret("33" * 32)
NOW = 1_800_000_000.0
ROOT = "/ws"


def _ids() -> Iterator[str]:
    for n in itertools.count(1):
        yield f"id-{n:04d}"


def make_engine() -> tuple[Engine, str]:
    """A fresh engine with the phone paired and one ready session; (engine, session id)."""
    keys = ConversationKeyCache(BRIDGE.secret)
    counter = _ids()
    paired = [PairedPhone(PHONE.public_hex, PHONE.npub, "phone", "2026-01-01T00:00:00.000Z")]
    engine = Engine(
        EngineConfig(
            bridge_pubkey=BRIDGE.public_hex,
            machine="box",
            relays=("ws://127.0.0.1:7777",),
            roots=(ROOT,),
        ),
        EngineState(phones=paired),
        decrypt=lambda author, payload: decrypt(payload, keys.get(author)),
        new_id=lambda: next(counter),
        now=NOW,
    )
    create = seal(encode(CreateSessionCommand()), created_at=int(NOW) - 100)
    start = next(
        e for e in engine.handle(CommandEventReceived(create), NOW) if isinstance(e, StartRunner)
    )
    session_id = start.record.session_id
    engine.handle(AgentReady(session_id, "sdk-1", "m", ROOT), NOW)
    return engine, session_id


def seal(
    plaintext: str,
    *,
    author: Keypair = PHONE,
    key_of: Keypair | None = None,
    kind: int = COMMAND_KIND,
    tags: Sequence[Sequence[str]] | None = None,
    created_at: int = int(NOW),
    raw_content: bool = False,
) -> VerifiedEvent:
    """A signed event from `author`.

    Args:
        key_of: encrypt with the conversation key of (this key, bridge) instead of the author's:
            a payload the bridge cannot decrypt for that author.
        tags: the event's tags (default: the command tags to the bridge).
        raw_content: put `plaintext` in ``content`` as is (not NIP-44 at all).
    """
    if raw_content:
        content = plaintext
    else:
        secret = (key_of or author).secret
        content = encrypt(plaintext, conversation_key(secret, bytes.fromhex(BRIDGE.public_hex)))
    if tags is None:
        tags = command_tags(BRIDGE.public_hex, created_at)
    return sign_event(author, kind, content, tags, created_at=created_at)


def snapshot(engine: Engine) -> dict[str, Any]:
    """Everything of the engine's state a command could change, but the dedup record."""
    return {
        "sessions": engine.session_records(),
        "tombstones": list(engine.sessions.tombstones),
        "alive": {r.session_id: engine.is_alive(r.session_id) for r in engine.session_records()},
        "phones": engine.paired_phones(),
        "phone_caps": engine.phones.caps(),
        "cursor": engine.admission.ingest.last_seen,
        "window": engine.pairing.window,
        "last_command_at": engine.last_command_at,
        "folders": engine.heartbeat.folders,
        "syncs": engine.sync.active_count,
        "credentials": engine.accounts.credentials,
        "heartbeat": engine.heartbeat_message(),
        "deadline": engine.next_deadline(),
    }


def _decodes(text: str) -> bool:
    try:
        decode_phone_to_bridge(text)
    except DecodeError:
        return False
    return True


@dataclass(frozen=True, slots=True)
class Fed:
    """An event for :func:`check_ingest` and whether it is bad by construction.

    `plaintext` is what the bridge would decrypt (None when it cannot: wrong key, not NIP-44).
    `refused` marks events the engine must refuse whatever they say (a stranger's, addressed
    elsewhere, of another kind, or undecryptable).
    """

    event: VerifiedEvent
    plaintext: str | None
    refused: bool = False


def bad_plaintexts(fed: Sequence[Fed]) -> bool:
    """True when none of the events yields a valid command (the reference assembler decides)."""
    assembler = Assembler()
    for item in fed:
        if item.refused or item.plaintext is None:
            continue
        assembled = assembler.feed(item.plaintext, NOW, sender=item.event.pubkey)
        if assembled is not None and _decodes(assembled):
            return False
    return True


_ALLOWED = (Dropped, Commit)


def check_ingest(engine: Engine, fed: Iterable[Fed], *, now: float = NOW) -> list[Effect]:
    """Feed `fed`; enforce the bad-input rule when no event decodes. Returns the effects."""
    items = list(fed)
    before = snapshot(engine)
    remembered = engine.admission.ingest.remembered
    effects: list[Effect] = []
    for item in items:
        effects.extend(engine.handle(CommandEventReceived(item.event), now))  # never raises
    assembler = engine.admission.ingest.assembler
    assert assembler.open_groups <= MAX_OPEN_GROUPS
    assert assembler.buffered_bytes <= MAX_BUFFERED_BYTES
    if not bad_plaintexts(items):
        return effects
    ids = {item.event.id for item in items}
    for effect in effects:
        assert isinstance(effect, _ALLOWED), f"bad input produced {effect!r:.200}"
        if isinstance(effect, Commit):
            assert effect.outbox == (), f"bad input produced a publish: {effect.outbox!r:.200}"
            for op in effect.ops:
                assert isinstance(op, MarkProcessed) and op.event_id in ids, f"bad op {op!r:.200}"
    after = snapshot(engine)
    assert after == before, _diff(before, after)
    assert engine.admission.ingest.remembered - remembered <= len(ids)
    return effects


def _diff(before: dict[str, Any], after: dict[str, Any]) -> str:
    changed = [key for key in before if before[key] != after[key]]
    return "bad input changed the engine's state: " + ", ".join(
        f"{key}: {before[key]!r:.120} -> {after[key]!r:.120}" for key in changed
    )
