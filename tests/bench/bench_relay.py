"""The embedded relay's candidates side by side: the project's relay against LocalRelay as shipped.

Issue 15 asks the default relay to have none of the four defects measured on rust-nostr's
LocalRelay, the previous embedded relay, and to compare candidates on them plus NIP-01/09/11/33/40.
Both candidates run here as the daemon ran them: LocalRelay with its LMDB store, the rate limit
the daemon set (6,000 notes a minute, 500 REQs) and the write policy as it shipped (relaypolicy's
per-writer limit of 300 events and 25/s); ours with its SQLite store and the policy it ships with
(no per-writer limit). Each case runs against both in the same run:

1. **Nagle**: a REQ answered by one stored event and EOSE, i.e. two frames written back to back;
   p50 of 40 round trips. A relay without ``TCP_NODELAY`` holds the second frame until the
   client's delayed ACK (~40 ms).
2. **Hang-ups**: 10,000 events pipelined on one connection by a registered writer; how many were
   accepted before the relay closed the connection (if it did), and the rate.
3. **Holes** (no policy: the store alone): 700 stored replies, then the phone's filter (``kinds``+``authors``+``#p``, no
   ``limit``); how many of the 700 came back.
4. **Blocked**: a paired phone sends 1,000 ``sync-ack``-sized commands at once (one per chunk of
   a 50,000-entry sync); how many were refused.
5. **Speed** (no policy: the relays alone): p50 of one hop (publish → a subscriber has it) over 300 events, and the rate of
   3,000 pipelined events through to a subscriber.

Then the NIP checks (no policy): NIP-01 ephemeral events passed on and not stored, NIP-09
deletion, NIP-11 document, NIP-33 (addressable) replacement, NIP-40 expired events refused.
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
import urllib.request
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import orjson
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from bridge.nostr.event import VerifiedEvent, checked_signatures, expiration_tag, sign_event
from bridge.nostr.keys import Keypair
from bridge.runtime.edges.embedded_relay import EmbeddedRelay
from relaypolicy.config import DEFAULT_CONFIG, RateLimit
from relaypolicy.embedded import EmbeddedPolicy, embedded_policy
from relaypolicy.pipeline import RelayPolicy
from relaypolicy.registry import MemoryRegistry
from tests.bench.common import Row
from tests.support.relay import LoopbackRelay

__all__ = ["notes", "run"]

BRIDGE = Keypair.from_secret("71" * 32)
PHONE = Keypair.from_secret("72" * 32)
OURS = "ours (bridge.relay)"
THEIRS = "LocalRelay as shipped"
SHIPPED_WRITER_LIMIT = RateLimit(300, 25.0)

_notes: list[str] = []


def _now() -> int:
    return int(time.time())


def _from_elsewhere(event: VerifiedEvent) -> VerifiedEvent:
    """`event`, signed here but forgotten by this process's memo of checked signatures.

    Our relay runs in this process; without this it would skip the signature check of every
    event the bench signed (:data:`~bridge.nostr.event.checked_signatures`), which it does for
    a daemon's own events but not for a phone's, nor for a relay serving other processes.
    """
    checked_signatures.clear()
    return event


def _reply(text: str, at: int) -> VerifiedEvent:
    tags = [["p", PHONE.public_hex], list(expiration_tag(_now() + 3600))]
    return _from_elsewhere(sign_event(BRIDGE, 4516, text, tags, created_at=at))


def _command(text: str) -> VerifiedEvent:
    tags = [["p", BRIDGE.public_hex], list(expiration_tag(_now() + 3600))]
    return _from_elsewhere(sign_event(PHONE, 4515, text, tags, created_at=_now()))


@dataclass
class Candidate:
    name: str
    url: str = ""
    results: dict[str, float] = field(default_factory=dict)
    nips: dict[str, bool] = field(default_factory=dict)


def _policy(writer_limit: RateLimit | None) -> EmbeddedPolicy:
    registry = MemoryRegistry([BRIDGE.public_hex, PHONE.public_hex])
    return EmbeddedPolicy(
        RelayPolicy(registry, replace(DEFAULT_CONFIG, writer_per_pubkey=writer_limit))
    )


@asynccontextmanager
async def _serve(name: str, root: Path, *, with_policy: bool) -> AsyncIterator[str]:
    """A fresh relay of candidate ``name``, its URL while the block runs."""
    if name == OURS:  # with the daemon's own admission (the CodeDeck kinds, registered writers)
        registry = MemoryRegistry([BRIDGE.public_hex, PHONE.public_hex])
        admit = embedded_policy(registry).admit if with_policy else None
        ours = EmbeddedRelay("127.0.0.1", 0, admit=admit, database_dir=root)
        await ours.start()
        try:
            yield ours.local_url
        finally:
            await ours.stop()
        return
    policy = _policy(SHIPPED_WRITER_LIMIT) if with_policy else None
    theirs = LoopbackRelay(lmdb_dir=root, notes_per_minute=6_000, max_reqs=500, policy=policy)
    await theirs.start()
    try:
        yield theirs.url
    finally:
        await theirs.stop()


async def _send(ws: ClientConnection, *parts: object) -> None:
    await ws.send(orjson.dumps(list(parts)).decode())


async def _recv(ws: ClientConnection, timeout: float = 10.0) -> list[Any]:
    frame = orjson.loads(await asyncio.wait_for(ws.recv(), timeout))
    assert isinstance(frame, list)
    return frame


async def _until(ws: ClientConnection, head: str, timeout: float = 10.0) -> list[Any]:
    while True:
        frame = await _recv(ws, timeout)
        if frame[0] == head:
            return frame


# --- the four defects -----------------------------------------------------------------------


async def _nagle(url: str) -> float:
    async with connect(url, compression=None) as ws:
        stored = _reply("stored", _now())
        await _send(ws, "EVENT", stored.to_dict())
        await _until(ws, "OK")
        times = []
        for n in range(40):
            started = time.perf_counter()
            await _send(ws, "REQ", f"q{n}", {"ids": [stored.id]})
            await _until(ws, "EOSE")
            times.append(time.perf_counter() - started)
            await _send(ws, "CLOSE", f"q{n}")
    return statistics.median(times) * 1000


async def _burst(url: str, count: int = 10_000) -> tuple[int, float, bool]:
    events = [_command(f"burst {n}") for n in range(count)]
    accepted = 0
    closed = False
    started = time.perf_counter()
    async with connect(url, compression=None) as ws:

        async def publish() -> None:
            for event in events:
                await _send(ws, "EVENT", event.to_dict())

        async def answers() -> None:
            nonlocal accepted
            for _ in events:
                frame = await _until(ws, "OK", timeout=30)
                accepted += bool(frame[2])

        try:
            await asyncio.gather(publish(), answers())
        except (ConnectionClosed, TimeoutError):
            closed = True
    return accepted, accepted / (time.perf_counter() - started), closed


async def _holes(url: str, count: int = 700) -> int:
    now = _now()
    async with connect(url, compression=None) as bridge:
        for n in range(count):
            await _send(bridge, "EVENT", _reply(f"reply {n}", now - count + n).to_dict())
        for _ in range(count):
            await _until(bridge, "OK")
    async with connect(url, compression=None) as phone:
        phone_filter = {
            "kinds": [4516],
            "authors": [BRIDGE.public_hex],
            "#p": [PHONE.public_hex],
            "since": now - 3600,
        }
        await _send(phone, "REQ", "back", phone_filter)
        got = 0
        while (await _recv(phone))[0] != "EOSE":
            got += 1
    return got


async def _blocked(url: str, count: int = 1_000) -> int:
    acks = [_command(f"sync-ack {n:05d} " + "x" * 180) for n in range(count)]
    refused = 0
    async with connect(url, compression=None) as ws:
        for event in acks:
            await _send(ws, "EVENT", event.to_dict())
        for _ in acks:
            refused += not (await _until(ws, "OK"))[2]
    return refused


async def _speed(url: str) -> tuple[float, float]:
    async with connect(url, compression=None) as a, connect(url, compression=None) as b:
        await _send(b, "REQ", "live", {"kinds": [4516], "limit": 0})
        await _until(b, "EOSE")
        hops = []
        for n in range(300):
            event = _reply(f"hop {n}", _now())
            started = time.perf_counter()
            await _send(a, "EVENT", event.to_dict())
            await _until(b, "EVENT")
            hops.append(time.perf_counter() - started)
            await _until(a, "OK")
        events = [_reply(f"rate {n}", _now()) for n in range(3_000)]
        started = time.perf_counter()

        async def publish() -> None:
            for event in events:
                await _send(a, "EVENT", event.to_dict())

        async def receive() -> None:
            for _ in events:
                await _until(b, "EVENT", timeout=30)

        await asyncio.gather(publish(), receive())
        rate = len(events) / (time.perf_counter() - started)
    return statistics.median(hops) * 1000, rate


# --- NIP behaviour --------------------------------------------------------------------------


async def _nip_checks(url: str) -> dict[str, bool]:
    checks: dict[str, bool] = {}
    async with connect(url, compression=None) as a, connect(url, compression=None) as b:
        await _send(b, "REQ", "eph", {"kinds": [24515]})
        await _until(b, "EOSE")
        live = sign_event(BRIDGE, 24515, "live", created_at=_now())
        await _send(a, "EVENT", live.to_dict())
        await _until(a, "OK")
        passed_on = (await _until(b, "EVENT"))[2]["id"] == live.id
        await _send(a, "REQ", "eph-stored", {"kinds": [24515]})
        checks["NIP-01 ephemeral: passed on, not stored"] = passed_on and (
            (await _recv(a))[0] == "EOSE"
        )

        doomed = sign_event(BRIDGE, 1, "doomed", created_at=_now() - 5)
        await _send(a, "EVENT", doomed.to_dict())
        await _until(a, "OK")
        deletion = sign_event(BRIDGE, 5, "", [["e", doomed.id]], created_at=_now())
        await _send(a, "EVENT", deletion.to_dict())
        await _until(a, "OK")
        await _send(a, "REQ", "del", {"ids": [doomed.id]})
        checks["NIP-09 deletion removes the event"] = (await _recv(a))[0] == "EOSE"

        old = sign_event(BRIDGE, 30515, "old", [["d", "m"]], created_at=_now() - 10)
        new = sign_event(BRIDGE, 30515, "new", [["d", "m"]], created_at=_now())
        for event in (old, new):
            await _send(a, "EVENT", event.to_dict())
            await _until(a, "OK")
        await _send(a, "REQ", "addr", {"kinds": [30515], "authors": [BRIDGE.public_hex]})
        kept = []
        while (frame := await _recv(a))[0] != "EOSE":
            kept.append(frame[2]["id"])
        checks["NIP-33 addressable: only the newest kept"] = kept == [new.id]

        expired = sign_event(
            BRIDGE, 1, "late", [list(expiration_tag(_now() - 1))], created_at=_now() - 5
        )
        await _send(a, "EVENT", expired.to_dict())
        checks["NIP-40 expired event refused"] = (await _until(a, "OK"))[2] is False

    def nip11() -> bool:
        request = urllib.request.Request(
            url.replace("ws://", "http://"), headers={"Accept": "application/nostr+json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=5) as response:  # 127.0.0.1
                return "supported_nips" in orjson.loads(response.read())
        except Exception:
            return False

    checks["NIP-11 information document"] = await asyncio.to_thread(nip11)
    return checks


# --- run ------------------------------------------------------------------------------------


Case = Callable[[str], Any]


async def _measure() -> list[Candidate]:
    candidates = [Candidate(OURS), Candidate(THEIRS)]
    # (name, case, with the write policy as shipped); speed compares the relays alone.
    cases: list[tuple[str, Case, bool]] = [
        ("nagle", _nagle, True),
        ("burst", _burst, True),
        ("holes", _holes, False),  # the store alone (the writer limit would cut it first)
        ("blocked", _blocked, True),
        ("speed", _speed, False),
    ]
    with tempfile.TemporaryDirectory(prefix="bench-relay-") as tmp:
        root = Path(tmp)
        for case_name, case, with_policy in cases:
            for candidate in candidates:  # side by side, case by case
                store = root / f"{case_name}-{candidate.name[:4]}"
                async with _serve(candidate.name, store, with_policy=with_policy) as url:
                    outcome = await case(url)
                if case_name == "burst":
                    accepted, rate, closed = outcome
                    candidate.results["burst_accepted"] = accepted
                    candidate.results["burst_rate"] = rate
                    candidate.results["burst_closed"] = float(closed)
                elif case_name == "speed":
                    candidate.results["hop_ms"], candidate.results["rate"] = outcome
                else:
                    candidate.results[case_name] = outcome
        for candidate in candidates:
            async with _serve(
                candidate.name, root / f"nips-{candidate.name[:4]}", with_policy=False
            ) as url:
                candidate.nips = await _nip_checks(url)
    return candidates


def run() -> list[Row]:
    ours, theirs = asyncio.run(_measure())
    o, t = ours.results, theirs.results
    _notes.clear()
    _notes.append(
        f"relay candidates: Nagle case, REQ of one stored event → EOSE p50: ours {o['nagle']:.2f} ms,"
        f" LocalRelay {t['nagle']:.2f} ms. Burst of 10,000 events on one connection: ours accepted"
        f" {o['burst_accepted']:,.0f} (connection {'closed' if o['burst_closed'] else 'kept'}),"
        f" LocalRelay {t['burst_accepted']:,.0f} (connection"
        f" {'closed' if t['burst_closed'] else 'kept'}). Phone filter after 700 stored replies:"
        f" ours returned {o['holes']:,.0f}, LocalRelay {t['holes']:,.0f}. A paired phone's 1,000"
        f" sync acks at once: ours refused {o['blocked']:,.0f}, LocalRelay {t['blocked']:,.0f}."
    )
    for check in ours.nips:
        _notes.append(
            f"relay candidates, {check}: ours {'yes' if ours.nips[check] else 'NO'},"
            f" LocalRelay {'yes' if theirs.nips.get(check) else 'NO'}"
        )
    return [
        Row("relay", "REQ → 1 event + EOSE p50 (Nagle case)", o["nagle"], t["nagle"], THEIRS, "ms"),
        Row(
            "relay",
            "burst of 10,000 on one connection: accepted",
            o["burst_accepted"],
            t["burst_accepted"],
            THEIRS,
            "events",
        ),
        Row(
            "relay",
            "700 stored replies, phone filter: returned",
            o["holes"],
            t["holes"],
            THEIRS,
            "events",
        ),
        Row(
            "relay",
            "1,000 sync acks at once: refused",
            o["blocked"],
            t["blocked"],
            THEIRS,
            "events",
        ),
        Row("relay", "one hop p50 (publish → subscriber)", o["hop_ms"], t["hop_ms"], THEIRS, "ms"),
        Row(
            "relay", "3,000 pipelined events → subscriber", o["rate"], t["rate"], THEIRS, "events/s"
        ),
        Row(
            "relay",
            "burst rate (accepted events)",
            o["burst_rate"],
            t["burst_rate"],
            THEIRS,
            "events/s",
        ),
    ]


def notes() -> list[str]:
    return list(_notes)
