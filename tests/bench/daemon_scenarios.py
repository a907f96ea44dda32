"""The daemon benchmark's one-daemon cases (1 to 4), through one relay.

:func:`measure_one_phone` pairs a phone simulator and runs these cases on one testbed
(:mod:`tests.bench.daemon_support`: the test relay, or the daemon's embedded relay as ``make run``
starts it), one after the other (why in this order: below):

1. **live output**: ``lines N`` sized so the session holds exactly 5,000 entries; the time from
   publishing the input to the arrival of the last entry; then every seq is checked against the
   daemon's store, and a sync recovers any that the live path lost (how many is reported). The
   relay alone moving as many events of the same size, published the way a sender that waits for
   each ``OK`` publishes them (one at a time), is measured next to it.
2. **restart catch-up**: the daemon is stopped (SIGTERM), 1,000 ``input`` commands are queued
   while it is down, the daemon is started again; the time from the process start to the last
   ``input-ack`` at the phone, then the scripted agent's log is checked: every input executed
   exactly once. On the test relay the commands wait on the relay (published while the daemon is
   down; the daemon's ``since`` reaches back 300 s, so its backlog query also returns the
   commands of the cases before, and through a relay that caps a query's results, LocalRelay's
   500, the daemon pages through it). The embedded relay is down with the daemon, so there the
   commands wait in the phone, as in a real phone's outbox: the phone went offline before the
   stop, comes back as soon as the daemon is ready and publishes them, 50 at a time.
3. **ack latency**, after a restart, with the one phone paired: ``input`` → ``input-ack``, one
   input at a time (the next one is sent once the previous turn ended, so every sample meets a
   quiet daemon), interleaved sample by sample with two baselines, so all three see the same
   machine at the same moments: the echo bot (:mod:`tests.bench.echo_bot`: the same two relay
   crossings with no work, the floor; aim ≤ 2x) and the relay's one-way trip (a like-sized 4515
   published on one connection and received on a subscription of another). It comes before the
   sync, whose fresh phone stays paired: an ``input-ack`` goes to all phones, so every reply
   would be sealed twice (measured: 2.5x the echo bot with two phones, 2.0-2.1x with one).
4. **full sync**: while the daemon was down for the restart before case 3, a session was given
   50,000 transcript lines in the store (the output turn's lines, repeated: the live path is what
   case 1 times); then a second phone is paired, and the time from its ``sync-request`` to the
   last entry at the phone (the transcript complete there: what its user waits for) is taken,
   then the transcript is compared seq for seq with the store. The time to ``sync-end`` is
   reported too: it ends after the phone's acks, one per chunk, which the simulator sends one at
   a time, each after the relay's OK and behind its own decoding of the chunks (measured inside
   the daemon: its 1,000 chunks were through the embedded relay about 1 s after the request).

The order: LocalRelay (the test relay) hangs up (no close frame) on a connection that sends more
than about 6,000 events within a minute, so the cases where the daemon sends thousands (the
output turn; the catch-up's acks and turns; the pings' replies, then the sync's chunks) each
start on a fresh connection, after a restart. And the catch-up comes before the sync: the daemon's
backlog query pages back by ``created_at``, and a relay that returns at most 500 events per query
leaves the rest of a second with more than 500 (the fresh phone's 1,000 ``sync-ack`` commands
take a few seconds) unread; catch-up commands dated in that second would never run. The relay's
drops of the daemon's connection during these cases are counted from its log.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from bridge.nostr.event import expiration_tag
from bridge.protocol import InputAckMessage, InputCommand
from bridge.protocol.codec import encode
from bridge.protocol.kinds import COMMAND_KIND, LIVE_KIND
from tests.bench.daemon_support import (
    EMBEDDED_RELAY,
    TURN_OVERHEAD_ENTRIES,
    DaemonNumbers,
    RelayProbe,
    RelayRun,
    Testbed,
    TimedPhone,
    acks,
    await_turn,
    create_session,
    delivery,
    is_stream_end,
    pair,
    phone_problems,
    relay_drops,
    run_case,
    testbed,
    turn_outputs,
)
from tests.bench.echo_bot import EchoBot, EchoProbe
from tests.support.daemon import DaemonProcess

__all__ = [
    "CATCHUP_COMMANDS",
    "CATCHUP_TIMEOUT",
    "LATENCY_SAMPLES",
    "OUTPUT_ENTRIES",
    "SYNC_ENTRIES",
    "CatchupResult",
    "LatencyResult",
    "OutputResult",
    "SyncRunResult",
    "measure_one_phone",
]

LATENCY_SAMPLES = 200
LATENCY_WARMUP = 10
OUTPUT_ENTRIES = 5000
"""Entries of the live-output turn: the user's input, ``lines N``, the turn's end."""
SYNC_ENTRIES = 50_000
"""Lines of the session a fresh phone syncs in full."""
CATCHUP_COMMANDS = 1000
CATCHUP_TIMEOUT = 60.0
_PUBLISH_BATCH = 50  # commands published concurrently, as a phone flushes its outbox
_SYNC_TIMEOUT = 120.0


# --- results ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LatencyResult:
    ack_ms: tuple[float, ...]
    echo_ms: tuple[float, ...]
    """The echo bot's round trips, sampled alternately with the acks."""
    relay_ms: tuple[float, ...]
    """The relay's one-way trips (publish → arrival on a subscription), sampled alongside."""
    nodelay: bool
    """Whether the test relay's sockets had ``TCP_NODELAY`` (see ``RelayNoDelay``)."""


@dataclass(frozen=True, slots=True)
class OutputResult:
    entries: int
    """Entries of the turn in the daemon's store."""
    live_entries: int
    """Of those, how many reached the phone live."""
    seconds: float
    """From publishing the input to the last live arrival."""
    first_entry_ms: float
    lost_live: int
    recovered_by_sync: bool | None
    """None when nothing was lost (no sync needed)."""
    relay_events: int
    relay_seconds: float
    relay_lost: int


@dataclass(frozen=True, slots=True)
class SyncRunResult:
    entries: int
    seconds: float
    first_chunk_seconds: float
    """From the request to the first chunk at the phone."""
    last_chunk_seconds: float
    """From the request to the last chunk at the phone; the rest is the phone's acks and the
    daemon's ``sync-end`` once all were in (the phone sends its acks one at a time)."""
    complete: bool
    requests: int
    matches_store: bool
    chunks: int


@dataclass(frozen=True, slots=True)
class CatchupResult:
    commands: int
    queued_in: str
    """Where the commands waited: "the relay" or "the phone"."""
    publish_seconds: float
    ready_seconds: float
    """From the process start to the daemon's ready line (polled every 50 ms)."""
    seconds: float
    """From the process start to the last ``input-ack`` at the phone."""
    first_ack_seconds: float
    acks: int
    duplicate_acks: int
    executed_once: int
    executed_twice_or_more: int
    never_executed: int
    executed_seconds: float
    """From the process start until the agent's log holds every input."""


# --- 4: ack latency -----------------------------------------------------------------------------


async def _latency(bed: Testbed, phone: TimedPhone, session: str, samples: int) -> LatencyResult:
    bridge = await asyncio.to_thread(bed.daemon.keypair)
    echo = EchoProbe(bed.relay_url, phone.keypair, bridge.public_hex)
    bot = EchoBot(bed.relay_url, bridge, echo.listen, echo.reply_to, LATENCY_WARMUP + samples + 10)
    async with contextlib.AsyncExitStack() as stack:
        probe = await _probe(stack, bed)
        await bot.start()
        stack.callback(bot.stop)
        await echo.start()
        stack.push_async_callback(echo.close)
        return await _sample_latency(bed, phone, probe, echo, session, samples)


async def _sample_latency(
    bed: Testbed,
    phone: TimedPhone,
    probe: RelayProbe,
    echo: EchoProbe,
    session: str,
    samples: int,
) -> LatencyResult:
    ack_ms: list[float] = []
    echo_ms: list[float] = []
    relay_ms: list[float] = []
    expiry = [list(expiration_tag(int(time.time()) + 3600))]
    run = uuid.uuid4().hex[:8]
    for index in range(LATENCY_WARMUP + samples):
        input_id = f"lat-{run}-{index}"
        command = InputCommand(sessionId=session, text=f"ping {index}", inputId=input_id)
        plaintext = encode(phone.stamp(command))
        relay_seconds = await probe.round_trip(probe.probe_event(COMMAND_KIND, plaintext, expiry))
        echo_seconds = await echo.round_trip(echo.command(plaintext))

        event = phone.build_command(command)
        mark = phone.mark()
        start = time.perf_counter()
        await phone.publish_event(event)
        ack = await phone.wait_for(InputAckMessage, acks(input_id), after=mark, timeout=10)
        ack_seconds = phone.arrived_at[ack.index] - start
        await phone.wait_for("output", is_stream_end, after=mark, timeout=10)
        if index >= LATENCY_WARMUP:
            ack_ms.append(ack_seconds * 1000)
            echo_ms.append(echo_seconds * 1000)
            relay_ms.append(relay_seconds * 1000)
    nodelay = bed.nodelay is not None and bed.nodelay.available
    return LatencyResult(tuple(ack_ms), tuple(echo_ms), tuple(relay_ms), nodelay)


# --- 1: live output -----------------------------------------------------------------------------


async def _output(
    daemon: DaemonProcess, phone: TimedPhone, probe: RelayProbe, session: str, entries: int
) -> OutputResult:
    """The live-output case."""
    seq_before = max(phone.transcript(session), default=0)
    lines = entries - TURN_OVERHEAD_ENTRIES
    event = phone.build_command(InputCommand(sessionId=session, text=f"lines {lines}"))
    mark = phone.mark()
    start = time.perf_counter()
    await phone.publish_event(event)
    await await_turn(phone, mark)
    outputs = turn_outputs(phone, session, mark)
    stored = await asyncio.to_thread(daemon.transcript, session)
    wanted = range(seq_before + 1, max(stored) + 1)
    got = await delivery(phone, session, wanted, mark, start)

    # The relay alone: as many events of the same size, from one connection to another,
    # published one at a time, each waiting for its OK.
    sample = encode(outputs[len(outputs) // 2].message)
    relay_events = [probe.probe_event(LIVE_KIND, sample, [["s", session]]) for _ in range(entries)]
    relay_seconds = await probe.stream(relay_events)
    relay_lost = sum(1 for e in relay_events if e.id not in probe.arrivals)
    return OutputResult(
        entries=len(wanted),
        live_entries=got.live,
        seconds=got.last_arrival,
        first_entry_ms=got.first_arrival_ms,
        lost_live=got.lost,
        recovered_by_sync=got.recovered_by_sync,
        relay_events=entries,
        relay_seconds=relay_seconds,
        relay_lost=relay_lost,
    )


# --- 3: full sync -------------------------------------------------------------------------------


def _fill_transcript(home: Path, session: str, templates: list[str], entries: int) -> None:
    """Give `session` the lines 1..`entries` in the (stopped) daemon's store."""
    rows = [(session, seq, templates[(seq - 1) % len(templates)]) for seq in range(1, entries + 1)]
    with contextlib.closing(sqlite3.connect(home / "bridge.db")) as conn, conn:
        conn.execute("DELETE FROM transcripts WHERE session_id = ?", (session,))
        conn.executemany("INSERT INTO transcripts (session_id, seq, entry) VALUES (?, ?, ?)", rows)


async def _full_sync(bed: Testbed, session: str, entries: int) -> SyncRunResult:
    fresh = await pair(bed.daemon, bed.relay_url, "Fresh phone")
    try:
        mark = fresh.mark()
        start = time.perf_counter()
        await fresh.sync(session, wait=False)
        result = await fresh.wait_sync(session, timeout=_SYNC_TIMEOUT)
        seconds = time.perf_counter() - start
        chunks = [fresh.arrived_at[item.index] for item in fresh.messages("sync-chunk", after=mark)]
        held = fresh.transcript(session)
        stored = await asyncio.to_thread(bed.daemon.transcript, session)
        matches = set(held) == set(stored) and all(
            orjson.loads(text) == orjson.loads(held[seq].model_dump_json(exclude_none=True))
            for seq, text in stored.items()
        )
        return SyncRunResult(
            entries=len(held),
            seconds=seconds,
            first_chunk_seconds=min(chunks, default=start) - start,
            last_chunk_seconds=max(chunks, default=start) - start,
            complete=result.complete and result.seq_high == entries,
            requests=result.requests,
            matches_store=matches,
            chunks=fresh.count("sync-chunk", after=mark),
        )
    finally:
        await fresh.close()


# --- 2: restart catch-up ------------------------------------------------------------------------


async def _publish_all(phone: TimedPhone, events: list[Any]) -> float:
    start = time.perf_counter()
    for offset in range(0, len(events), _PUBLISH_BATCH):
        batch = events[offset : offset + _PUBLISH_BATCH]
        await asyncio.gather(*(phone.publish_event(event) for event in batch))
    return time.perf_counter() - start


async def _stop(bed: Testbed, phone: TimedPhone) -> None:
    """Stop the daemon; the phone goes offline first when its relay goes down with it."""
    if bed.relay_kind == EMBEDDED_RELAY:
        await phone.quiesce(0.2, timeout=10)
        await phone.go_offline()  # the relay goes down with the daemon: the phone queues
    code = await bed.daemon.stop()
    if code != 0:
        raise RuntimeError(f"the daemon exited with {code} on SIGTERM")
    if bed.relay_kind != EMBEDDED_RELAY:
        await phone.quiesce(0.2, timeout=10)  # the final heartbeat (machineOffline) is in


async def _restart(bed: Testbed, phone: TimedPhone, while_down: Callable[[], None]) -> None:
    """Stop the daemon, run `while_down` (on its store), start it, bring the phone back."""
    await _stop(bed, phone)
    await asyncio.to_thread(while_down)
    await bed.daemon.start()
    if not phone.online:
        await phone.go_online()


async def _catchup(
    bed: Testbed, phone: TimedPhone, session: str, commands: int, timeout: float
) -> CatchupResult:
    """Case 2."""
    daemon = bed.daemon
    embedded = bed.relay_kind == EMBEDDED_RELAY
    before = await asyncio.to_thread(daemon.executions)
    await _stop(bed, phone)
    mark = phone.mark()
    run = uuid.uuid4().hex[:8]
    ids = [f"cu-{run}-{n}" for n in range(commands)]
    # Queued over the outage, as a phone's outbox fills: 8 commands a second (1,000 span about
    # two minutes, inside the 300 s a command stays fresh). A relay returns at most 500 stored
    # events per request and the daemon pages back by `created_at`.
    now = int(time.time())
    events = [
        phone.build_command(
            InputCommand(sessionId=session, text=f"queued {n}", inputId=ids[n]),
            created_at=now - (commands - n) // 8,
        )
        for n in range(commands)
    ]
    publish_seconds = 0.0 if embedded else await _publish_all(phone, events)

    wanted = set(ids)
    start = time.perf_counter()
    await daemon.start()
    ready = time.perf_counter() - start
    if embedded:
        await phone.go_online(wait=False)
        publish_seconds = await _publish_all(phone, events)
    try:
        got = await phone.wait_for_count(
            "input-ack", commands, lambda m: m.inputId in wanted, after=mark, timeout=timeout
        )
    except TimeoutError:
        late = phone.messages(InputAckMessage, lambda m: m.inputId in wanted, after=mark)
        last = max((phone.arrived_at[item.index] - start for item in late), default=0.0)
        raise RuntimeError(
            f"{len({item.message.inputId for item in late})} of {commands} input-acks reached "
            f"the phone within {timeout:g} s of the restart (the last of them {last:.2f} s "
            "after the process start)"
        ) from None
    arrivals = [phone.arrived_at[item.index] for item in got]

    def executed() -> dict[str, int]:
        now = daemon.executions()
        return {uid: n - before.get(uid, 0) for uid, n in now.items() if n > before.get(uid, 0)}

    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    counts = await asyncio.to_thread(executed)
    while len(counts) < commands and loop.time() < deadline:
        await asyncio.sleep(0.1)
        counts = await asyncio.to_thread(executed)
    executed_seconds = time.perf_counter() - start
    await phone.quiesce(0.3, timeout=60)
    every_ack = phone.messages("input-ack", lambda m: m.inputId in wanted, after=mark)
    distinct = len({item.message.inputId for item in every_ack})
    return CatchupResult(
        commands=commands,
        queued_in="the phone" if embedded else "the relay",
        publish_seconds=publish_seconds,
        ready_seconds=ready,
        seconds=max(arrivals) - start,
        first_ack_seconds=min(arrivals) - start,
        acks=distinct,
        duplicate_acks=len(every_ack) - distinct,
        executed_once=sum(1 for n in counts.values() if n == 1),
        executed_twice_or_more=sum(1 for n in counts.values() if n > 1),
        never_executed=max(0, commands - len(counts)),
        executed_seconds=executed_seconds,
    )


# --- running the cases --------------------------------------------------------------------------


async def _probe(stack: contextlib.AsyncExitStack, bed: Testbed) -> RelayProbe:
    """The relay alone, started (and closed with `stack`); on the embedded relay, which admits
    only the bridge and its phones, it signs as the bridge."""
    bridge = await asyncio.to_thread(bed.daemon.keypair)
    probe = RelayProbe(bed.relay_url, bridge if bed.relay_kind == EMBEDDED_RELAY else None)
    stack.push_async_callback(probe.close)
    await probe.start()
    return probe


async def _output_case(bed: Testbed, phone: TimedPhone, session: str, entries: int) -> OutputResult:
    async with contextlib.AsyncExitStack() as stack:
        probe = await _probe(stack, bed)
        return await _output(bed.daemon, phone, probe, session, entries)


async def measure_one_phone(
    numbers: DaemonNumbers,
    run: RelayRun,
    workdir: Path,
    *,
    latency_samples: int,
    output_entries: int,
    sync_entries: int,
    catchup_commands: int,
    catchup_timeout: float,
    progress: Callable[[str], None],
) -> None:
    """Cases 1 to 4 through `run`'s relay, on one daemon and its phones."""
    async with contextlib.AsyncExitStack() as stack:
        bed = await testbed(stack, workdir, run.relay)
        daemon = bed.daemon
        stack.callback(lambda: setattr(run, "disconnects", relay_drops(daemon.log_text)))
        await daemon.start()
        phone = await pair(daemon, bed.relay_url, "Bench phone")
        stack.push_async_callback(phone.close)
        chat = await create_session(phone)
        bulk = await create_session(phone)
        queue = await create_session(phone)
        archive = await create_session(phone) if sync_entries else None

        progress(f"live output ({run.relay})")
        run.output = await run_case(
            numbers, f"live output{run.suffix}", _output_case(bed, phone, bulk, output_entries)
        )
        templates = list((await asyncio.to_thread(daemon.transcript, bulk)).values())
        progress(f"restart catch-up ({run.relay})")
        run.catchup = await run_case(
            numbers,
            f"restart catch-up{run.suffix}",
            _catchup(bed, phone, queue, catchup_commands, catchup_timeout),
        )
        if not daemon.running:
            return  # the catch-up failed to bring it back: its failure is recorded
        syncing = archive is not None and bool(templates)

        def fill_archive() -> None:
            if archive is not None and syncing:
                _fill_transcript(daemon.home, archive, templates, sync_entries)

        await _restart(bed, phone, fill_archive)  # a fresh relay connection (see the docstring)
        progress(f"ack latency ({run.relay})")
        run.latency = await run_case(
            numbers, f"ack latency{run.suffix}", _latency(bed, phone, chat, latency_samples)
        )
        if archive is not None and syncing:
            progress(f"full sync ({run.relay})")
            run.sync = await run_case(
                numbers, f"full sync{run.suffix}", _full_sync(bed, archive, sync_entries)
            )
        phone_problems(numbers, [phone])
