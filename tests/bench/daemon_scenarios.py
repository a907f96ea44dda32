"""The daemon benchmark's shared helpers and its one-daemon cases (1 to 5).

The helpers, which :mod:`tests.bench.daemon_load` imports too: :class:`TimedPhone` (a phone
simulator that stamps arrival times), :class:`RelayNoDelay`, the relay probe (the relay alone,
the baseline), pairing and session helpers, the testbed (a
:class:`~tests.support.relay.LoopbackRelay` on 127.0.0.1 and the real ``codedeck-bridge run``
subprocess, scripted agent, on a temporary home), how a turn's live delivery is checked, and
:class:`DaemonNumbers`, which collects every case's result. The cases on a daemon of their own
(6: three phones, 7: memory) are in :mod:`tests.bench.daemon_load`;
:func:`tests.bench.bench_daemon.measure_daemon` runs them all, in order.

:func:`measure_one_phone` pairs a phone simulator and runs these cases one after the other on
the same relay and daemon:

1. **live output**: ``lines N`` sized so the session holds exactly 5,000 entries; the time from
   publishing the input to the arrival of the last entry; then every seq is checked against the
   daemon's store, and a sync recovers any that the live path lost (how many is reported). The
   relay alone moving as many events of the same size, published the way the daemon's sender
   publishes them (one at a time, waiting for each ``OK``), is measured next to it.
2. **full sync**: a second phone is paired after the 5,000 entries exist; the time from its
   ``sync-request`` to a complete transcript, then compared seq for seq with the daemon's store.
3. **restart catch-up**: the daemon is stopped (SIGTERM), 1,000 ``input`` commands are published
   to the relay while it is down, the daemon is started again; the time from the process start
   to the last ``input-ack`` at the phone, then the scripted agent's log is checked: every input
   executed exactly once. The daemon's ``since`` reaches back 300 s, so its backlog query also
   returns the commands of the cases before: through a relay that caps a query's results
   (LocalRelay and strfry: 500), the daemon has to page through it.
4. **ack latency**: ``input`` → ``input-ack``, one input at a time (the next one is sent once the
   previous turn ended, so every sample meets a quiet daemon), interleaved sample by sample with
   the relay's own round trip (a like-sized 4515 event published on one connection and received
   on a subscription of another), so both see the same machine at the same moments.
5. **ack latency through the relay as shipped**: the same, after ``TCP_NODELAY`` is cleared
   again on the relay's sockets; every case before runs with it set (:class:`RelayNoDelay`).

The order matters: LocalRelay hangs up (no close frame) on a connection that sends more than
6,000 events within a minute, so the two cases where the daemon sends thousands (the output turn,
the catch-up's acks and replies) fall on two different connections, before and after the
restart; :attr:`DaemonNumbers.disconnects` counts how often it happened anyway (cases 6 and 7
count their own daemon's).

Times are taken when a message *arrives* at the phone (:class:`TimedPhone` stamps each decoded
message with ``time.perf_counter()`` in the relay reader callback), not when a waiting coroutine
happens to be scheduled. Events are signed before a timer starts, for the baseline and for the
phone alike: both sides measure transport and processing, not the sender's signature.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from bridge.nostr.event import VerifiedEvent, expiration_tag, sign_event
from bridge.nostr.filters import Filter
from bridge.nostr.keys import Keypair
from bridge.nostr.nip44 import ConversationKeyCache, encrypt
from bridge.nostr.pool import RelayPool
from bridge.nostr.relay import RelayEventReceived
from bridge.protocol import CreateSessionCommand, InputAckMessage, InputCommand
from bridge.protocol.codec import encode
from bridge.protocol.kinds import COMMAND_KIND, LIVE_KIND
from tests.support.daemon import DaemonProcess
from tests.support.phone import PhoneSimulator
from tests.support.phone_state import Received

if TYPE_CHECKING:
    # Types only: daemon_load imports this module, never the other way round at run time.
    from tests.bench.daemon_load import FanoutResult, MemoryResult
    from tests.support.relay import LoopbackRelay

__all__ = [
    "CATCHUP_COMMANDS",
    "CATCHUP_TIMEOUT",
    "DISCONNECT_MARK",
    "LATENCY_SAMPLES",
    "NAGLE_SAMPLES",
    "SYNC_ENTRIES",
    "CatchupResult",
    "DaemonNumbers",
    "LatencyResult",
    "OutputResult",
    "PhoneDelivery",
    "RelayNoDelay",
    "SyncRunResult",
    "TimedPhone",
    "measure_one_phone",
    "percentile",
    "run_case",
]

LATENCY_SAMPLES = 200
NAGLE_SAMPLES = 50
LATENCY_WARMUP = 10
SYNC_ENTRIES = 5000
"""Entries of the throughput/sync session: the user's input, ``lines N``, the turn's end."""
CATCHUP_COMMANDS = 1000
CATCHUP_TIMEOUT = 60.0
OUTPUT_TIMEOUT = 60.0
LOST_END_QUIET = 5.0  # longer than the daemon's first reconnect delay (backoff base 1 s)
DISCONNECT_MARK = "closed: connection lost"
"""What the daemon logs when the relay hangs up on it (LocalRelay sends no close frame)."""
_TURN_OVERHEAD_ENTRIES = 2  # the user entry before the lines, the stream_end entry after them
_PUBLISH_BATCH = 50  # commands published concurrently while the daemon is down


def percentile(values: Sequence[float], pct: float) -> float:
    """The ``pct`` percentile (0-100) with linear interpolation between closest ranks."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("no values")
    rank = (len(ordered) - 1) * pct / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


class TimedPhone(PhoneSimulator):
    """A phone simulator that stamps each received message with its arrival time.

    ``arrived_at[i]`` is the ``time.perf_counter()`` at which ``received[i]`` was decoded, taken
    in the relay reader callback itself.
    """

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.arrived_at: list[float] = []

    def handle_event(self, delivered: RelayEventReceived) -> None:
        super().handle_event(delivered)
        now = time.perf_counter()
        while len(self.arrived_at) < len(self.received):
            self.arrived_at.append(now)


class RelayNoDelay:
    """Sets ``TCP_NODELAY`` on the relay's accepted sockets, as strfry (uWebSockets) does.

    rust-nostr's LocalRelay leaves Nagle's algorithm on for the connections it accepts (measured:
    ``TCP_NODELAY`` is 0 on its side, 1 on the asyncio client's). A small frame it writes right
    after another one that the client has not acknowledged yet (the client's kernel delays ACKs
    by up to 40 ms) then waits for that ACK: the ``EVENT`` of a phone's command stalls behind the
    ``OK`` of the daemon's last publish, the ack behind the ``OK`` of the command. That adds about
    40 ms to nearly every ack of a busy session and says nothing about the daemon, so the cases
    are measured with the option set, and the relay as shipped only in a last extra case. The
    relay runs in this process, on Rust threads: its sockets are this process's file
    descriptors, found in ``/proc/self/fd`` (Linux) by their local port.
    """

    def __init__(self, port: int) -> None:
        self.port = port
        self.available = Path("/proc/self/fd").is_dir()

    def apply(self, enabled: bool = True) -> int:
        """Set (or clear) the option on every connection accepted on the relay's port.

        Returns how many sockets changed.
        """
        if not self.available:
            return 0
        changed = 0
        for name in os.listdir("/proc/self/fd"):
            try:
                duplicate = os.dup(int(name))
            except OSError:
                continue  # closed meanwhile
            try:
                sock = socket.socket(fileno=duplicate)
            except OSError:
                os.close(duplicate)  # not a socket
                continue
            try:
                if sock.family != socket.AF_INET or sock.type != socket.SOCK_STREAM:
                    continue
                if sock.getsockname()[1] != self.port:
                    continue
                sock.getpeername()  # the listener has no peer: OSError, skipped
                if bool(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)) != enabled:
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, int(enabled))
                    changed += 1
            except OSError:
                continue
            finally:
                sock.close()  # closes the duplicate only
        return changed

    async def run(self, interval: float = 0.05) -> None:
        """Keep the option set on every connection, new ones included, until cancelled.

        A scan that fails (``/proc`` unreadable, out of descriptors) is retried at the next
        tick: this helper must never be what breaks a run.
        """
        while True:
            with contextlib.suppress(OSError):
                self.apply()
            await asyncio.sleep(interval)


# --- results ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LatencyResult:
    ack_ms: tuple[float, ...]
    relay_ms: tuple[float, ...]
    nodelay: bool
    """Whether the relay's sockets had ``TCP_NODELAY`` (see :class:`RelayNoDelay`)."""


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
    complete: bool
    requests: int
    matches_store: bool
    chunks: int


@dataclass(frozen=True, slots=True)
class CatchupResult:
    commands: int
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


@dataclass(frozen=True, slots=True)
class PhoneDelivery:
    """What one phone got of a turn's live output."""

    live: int
    """Entries of the turn that reached the phone live."""
    lost: int
    recovered_by_sync: bool | None
    """None when nothing was lost (no sync needed)."""
    first_arrival_ms: float
    """From publishing the input to the first live entry at this phone."""
    last_arrival: float
    """Seconds from publishing the input to the last live entry at this phone."""


@dataclass(slots=True)
class DaemonNumbers:
    latency_nagle: LatencyResult | None = None
    """The ack latency through the relay as rust-nostr ships it (Nagle on)."""
    latency: LatencyResult | None = None
    output: OutputResult | None = None
    sync: SyncRunResult | None = None
    catchup: CatchupResult | None = None
    fanout: FanoutResult | None = None
    memory: MemoryResult | None = None
    memory_unavailable: bool = False
    """No ``/proc/<pid>/status`` here (not Linux): case 7 was skipped."""
    disconnects: int = 0
    """How often the relay dropped the first daemon's connection (cases 1-5; from its log)."""
    problems: list[str] = field(default_factory=list)


# --- helpers ------------------------------------------------------------------------------------


def _acks(input_id: str) -> Callable[[InputAckMessage], bool]:
    return lambda message: message.inputId == input_id


def _is_stream_end(message: Any) -> bool:
    metadata = message.entry.metadata
    return isinstance(metadata, dict) and bool(metadata.get("stream_end"))


async def _pair(daemon: DaemonProcess, relay_url: str, label: str) -> TimedPhone:
    opened = await daemon.call("pair.open", duration=600)
    phone = TimedPhone(relays=[relay_url], label=label)
    ack = await phone.pair(opened["url"], timeout=20)
    if not ack.message.ok:
        await phone.close()
        raise RuntimeError(f"pairing refused: {ack.message.reason}")
    await phone.wait_for("sessions", timeout=20)
    return phone


async def _create_session(phone: TimedPhone) -> str:
    mark = phone.mark()
    await phone.send(CreateSessionCommand())
    ready = await phone.wait_for("session-ready", after=mark, timeout=30)
    return str(ready.message.session.id)


class _RelayProbe:
    """Two connections to the relay: one publishes pre-signed events, the other subscribes."""

    def __init__(self, relay_url: str) -> None:
        self.author = Keypair.generate()
        self._reader_key = Keypair.generate()
        self._waiters: dict[str, asyncio.Future[float]] = {}
        self.arrivals: dict[str, float] = {}
        self._writer = RelayPool([relay_url], self.author, on_event=lambda _: None)
        self._reader = RelayPool([relay_url], self._reader_key, on_event=self._on_event)
        self._keys = ConversationKeyCache(self.author.secret)
        self.stranger = Keypair.generate().public_hex
        """The recipient of the probe events: nobody who subscribes to them (not the bridge)."""

    def _on_event(self, received: RelayEventReceived) -> None:
        now = time.perf_counter()
        self.arrivals[received.event.id] = now
        waiter = self._waiters.pop(received.event.id, None)
        if waiter is not None and not waiter.done():
            waiter.set_result(now)

    async def start(self) -> None:
        author = (self.author.public_hex,)
        await self._reader.subscribe(
            "probe", lambda: (Filter(kinds=(COMMAND_KIND, LIVE_KIND), authors=author),)
        )
        await self._reader.start()
        await self._writer.start()
        async with asyncio.timeout(10):
            await self._reader.wait_open()
            await self._writer.wait_open()

    async def close(self) -> None:
        await self._writer.close()
        await self._reader.close()

    async def round_trip(self, event: VerifiedEvent, timeout: float = 10.0) -> float:
        """Seconds from publishing `event` to its arrival on the subscription."""
        waiter: asyncio.Future[float] = asyncio.get_running_loop().create_future()
        self._waiters[event.id] = waiter
        start = time.perf_counter()
        report = await self._writer.publish(event)
        if not report.delivered:
            raise RuntimeError(f"the relay refused the probe event: {report}")
        async with asyncio.timeout(timeout):
            arrived = await waiter
        return arrived - start

    async def stream(self, events: Sequence[VerifiedEvent], settle: float = 2.0) -> float:
        """Publish `events` one at a time (each waiting for OK); seconds until the last arrived.

        Events that never arrive are left out of :attr:`arrivals` (the caller counts them).
        """
        last = events[-1].id
        waiter: asyncio.Future[float] = asyncio.get_running_loop().create_future()
        self._waiters[last] = waiter
        start = time.perf_counter()
        for event in events:
            await self._writer.publish(event)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(settle):
                await waiter
        self._waiters.pop(last, None)
        arrived = [self.arrivals[e.id] for e in events if e.id in self.arrivals]
        return (max(arrived) if arrived else time.perf_counter()) - start

    def probe_event(
        self, kind: int, plaintext: str, tags: Sequence[Sequence[str]]
    ) -> VerifiedEvent:
        """A signed event like the bridge's or the phone's: NIP-44 text, ``p`` tag, `tags`."""
        content = encrypt(plaintext, self._keys.get(self.stranger))
        return sign_event(
            self.author,
            kind,
            content,
            [["p", self.stranger], *tags],
            created_at=int(time.time()),
        )


# --- the four cases -----------------------------------------------------------------------------


async def _latency(
    phone: TimedPhone, probe: _RelayProbe, session: str, samples: int, *, nodelay: bool
) -> LatencyResult:
    ack_ms: list[float] = []
    relay_ms: list[float] = []
    expiry = [list(expiration_tag(int(time.time()) + 3600))]
    run = uuid.uuid4().hex[:8]
    for index in range(LATENCY_WARMUP + samples):
        input_id = f"lat-{run}-{index}"
        command = InputCommand(sessionId=session, text=f"ping {index}", inputId=input_id)
        baseline_event = probe.probe_event(COMMAND_KIND, encode(phone.stamp(command)), expiry)
        relay_seconds = await probe.round_trip(baseline_event)

        event = phone.build_command(command)
        mark = phone.mark()
        start = time.perf_counter()
        await phone.publish_event(event)
        ack = await phone.wait_for(InputAckMessage, _acks(input_id), after=mark, timeout=10)
        ack_seconds = phone.arrived_at[ack.index] - start
        await phone.wait_for("output", _is_stream_end, after=mark, timeout=10)
        if index >= LATENCY_WARMUP:
            ack_ms.append(ack_seconds * 1000)
            relay_ms.append(relay_seconds * 1000)
    return LatencyResult(tuple(ack_ms), tuple(relay_ms), nodelay)


async def _await_turn(phone: TimedPhone, mark: int) -> None:
    """Return once the turn begun after `mark` is over at `phone`, as far as it can tell."""
    try:
        await phone.wait_for("output", _is_stream_end, after=mark, timeout=OUTPUT_TIMEOUT)
        # One connection keeps the order, so nothing should trail the turn's last entry; a
        # short quiet period makes sure a straggler is not counted as lost.
        await phone.quiesce(0.3, timeout=30)
    except TimeoutError:
        # The last entry itself was lost live: wait until the daemon has had time to
        # reconnect and send whatever it still had queued.
        await phone.quiesce(LOST_END_QUIET, timeout=60)


def _turn_outputs(phone: TimedPhone, session: str, mark: int) -> list[Received[Any]]:
    outputs = phone.messages("output", lambda m: m.sessionId == session, after=mark)
    if not outputs:
        raise RuntimeError(f"no output of the turn reached {phone.label}")
    return outputs


async def _delivery(
    phone: TimedPhone, session: str, wanted: range, mark: int, start: float
) -> PhoneDelivery:
    """How many seqs of `wanted` reached `phone` live; one sync must bring any it lacks."""
    arrivals = [phone.arrived_at[item.index] for item in _turn_outputs(phone, session, mark)]
    held = phone.transcript(session)
    lost = sum(1 for seq in wanted if seq not in held)
    recovered: bool | None = None
    if lost:
        await phone.sync(session, wait=False)
        result = await phone.wait_sync(session, timeout=60)
        held = phone.transcript(session)
        recovered = result.complete and all(seq in held for seq in wanted)
    return PhoneDelivery(
        live=len(wanted) - lost,
        lost=lost,
        recovered_by_sync=recovered,
        first_arrival_ms=(min(arrivals) - start) * 1000,
        last_arrival=max(arrivals) - start,
    )


async def _output(
    daemon: DaemonProcess, phone: TimedPhone, probe: _RelayProbe, session: str, entries: int
) -> tuple[OutputResult, int]:
    """The live-output case; returns the result and the session's seq high."""
    seq_before = max(phone.transcript(session), default=0)
    lines = entries - _TURN_OVERHEAD_ENTRIES
    event = phone.build_command(InputCommand(sessionId=session, text=f"lines {lines}"))
    mark = phone.mark()
    start = time.perf_counter()
    await phone.publish_event(event)
    await _await_turn(phone, mark)
    outputs = _turn_outputs(phone, session, mark)
    stored = await asyncio.to_thread(daemon.transcript, session)
    seq_high = max(stored)
    wanted = range(seq_before + 1, seq_high + 1)
    delivery = await _delivery(phone, session, wanted, mark, start)

    # The relay alone: as many events of the same size, from one connection to another,
    # published one at a time (the daemon's sender waits for each OK the same way).
    sample = encode(outputs[len(outputs) // 2].message)
    relay_events = [probe.probe_event(LIVE_KIND, sample, [["s", session]]) for _ in range(entries)]
    relay_seconds = await probe.stream(relay_events)
    relay_lost = sum(1 for e in relay_events if e.id not in probe.arrivals)
    return (
        OutputResult(
            entries=len(wanted),
            live_entries=delivery.live,
            seconds=delivery.last_arrival,
            first_entry_ms=delivery.first_arrival_ms,
            lost_live=delivery.lost,
            recovered_by_sync=delivery.recovered_by_sync,
            relay_events=entries,
            relay_seconds=relay_seconds,
            relay_lost=relay_lost,
        ),
        seq_high,
    )


async def _full_sync(
    daemon: DaemonProcess, relay_url: str, session: str, seq_high: int
) -> SyncRunResult:
    fresh = await _pair(daemon, relay_url, "Fresh phone")
    try:
        mark = fresh.mark()
        start = time.perf_counter()
        await fresh.sync(session, wait=False)
        result = await fresh.wait_sync(session, timeout=60)
        seconds = time.perf_counter() - start
        held = fresh.transcript(session)
        stored = await asyncio.to_thread(daemon.transcript, session)
        matches = set(held) == set(stored) and all(
            orjson.loads(text) == orjson.loads(held[seq].model_dump_json(exclude_none=True))
            for seq, text in stored.items()
        )
        return SyncRunResult(
            entries=len(held),
            seconds=seconds,
            complete=result.complete and result.seq_high == seq_high,
            requests=result.requests,
            matches_store=matches,
            chunks=fresh.count("sync-chunk", after=mark),
        )
    finally:
        await fresh.close()


async def _catchup(
    daemon: DaemonProcess, phone: TimedPhone, session: str, commands: int, timeout: float
) -> CatchupResult:
    before = await asyncio.to_thread(daemon.executions)
    code = await daemon.stop()
    if code != 0:
        raise RuntimeError(f"the daemon exited with {code} on SIGTERM")
    await phone.quiesce(0.2, timeout=10)  # the final heartbeat (machineOffline) is in
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
    publish_start = time.perf_counter()
    for offset in range(0, commands, _PUBLISH_BATCH):
        batch = events[offset : offset + _PUBLISH_BATCH]
        await asyncio.gather(*(phone.publish_event(event) for event in batch))
    publish_seconds = time.perf_counter() - publish_start

    wanted = set(ids)
    start = time.perf_counter()
    await daemon.start()
    ready = time.perf_counter() - start
    try:
        acks = await phone.wait_for_count(
            "input-ack", commands, lambda m: m.inputId in wanted, after=mark, timeout=timeout
        )
    except TimeoutError:
        got = phone.messages(InputAckMessage, lambda m: m.inputId in wanted, after=mark)
        last = max((phone.arrived_at[item.index] - start for item in got), default=0.0)
        raise RuntimeError(
            f"{len({item.message.inputId for item in got})} of {commands} input-acks reached the "
            f"phone within {timeout:g} s of the restart (the last of them {last:.2f} s after "
            "the process start)"
        ) from None
    arrivals = [phone.arrived_at[item.index] for item in acks]
    seconds = max(arrivals) - start
    first = min(arrivals) - start

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
    all_acks = phone.messages("input-ack", lambda m: m.inputId in wanted, after=mark)
    return CatchupResult(
        commands=commands,
        publish_seconds=publish_seconds,
        ready_seconds=ready,
        seconds=seconds,
        first_ack_seconds=first,
        acks=len({item.message.inputId for item in all_acks}),
        duplicate_acks=len(all_acks) - len({item.message.inputId for item in all_acks}),
        executed_once=sum(1 for n in counts.values() if n == 1),
        executed_twice_or_more=sum(1 for n in counts.values() if n > 1),
        never_executed=max(0, commands - len(counts)),
        executed_seconds=executed_seconds,
    )


# --- the testbed, and running the cases ---------------------------------------------------------


async def _cancel(task: asyncio.Task[None]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def _stop_daemon(daemon: DaemonProcess) -> None:
    """SIGTERM, and ``kill -9`` if that fails or takes too long; never raises."""
    try:
        if daemon.running:
            await daemon.stop()
    except Exception:
        pass  # killed below
    finally:
        daemon.kill()


def _count_disconnects(numbers: DaemonNumbers, daemon: DaemonProcess) -> None:
    numbers.disconnects = daemon.log_text.count(DISCONNECT_MARK)


def _phone_problems(numbers: DaemonNumbers, phones: Sequence[TimedPhone]) -> None:
    for phone in phones:
        if phone.errors or phone.violations or phone.conflicts:
            numbers.problems.append(
                f"{phone.label} saw {len(phone.errors)} error(s), {len(phone.violations)} "
                f"contract violation(s), {len(phone.conflicts)} conflict(s)"
            )


@dataclass(frozen=True, slots=True)
class _Testbed:
    relay: LoopbackRelay
    daemon: DaemonProcess
    nodelay: RelayNoDelay
    keeper: asyncio.Task[None]
    """Keeps ``TCP_NODELAY`` set on the relay's sockets until cancelled."""


async def _testbed(stack: contextlib.AsyncExitStack, directory: Path) -> _Testbed:
    """A relay (``TCP_NODELAY`` kept set) and a daemon (not started) with its home in `directory`.

    Cleanup, pushed on `stack`, runs in reverse order, each step even when an earlier one
    failed: the keeper stops, the daemon stops (or is killed), the relay stops.
    """
    from tests.support.relay import LoopbackRelay  # nostr_sdk is heavy: only when measuring

    workspace = directory / "ws"
    workspace.mkdir(parents=True)
    relay = await stack.enter_async_context(LoopbackRelay())
    daemon = DaemonProcess(
        directory / "home",
        [relay.url],
        workspace,
        machine="benchbox",
        env={"CODEDECK_AGENT": "scripted"},
    )
    stack.push_async_callback(_stop_daemon, daemon)
    assert relay.port is not None
    nodelay = RelayNoDelay(relay.port)
    keeper = asyncio.create_task(nodelay.run(), name="relay-nodelay")
    stack.push_async_callback(_cancel, keeper)
    return _Testbed(relay, daemon, nodelay, keeper)


async def run_case(numbers: DaemonNumbers, name: str, coro: Any) -> Any:
    """Run one case; a failure is recorded and the next cases still run when they can."""
    try:
        return await coro
    except Exception as exc:
        numbers.problems.append(f"{name} failed: {type(exc).__name__}: {exc}")
        return None


async def measure_one_phone(
    numbers: DaemonNumbers,
    workdir: Path,
    *,
    latency_samples: int,
    nagle_samples: int,
    sync_entries: int,
    catchup_commands: int,
    catchup_timeout: float,
    progress: Callable[[str], None],
) -> None:
    """Cases 1 to 5, on one relay, one daemon and its phones."""
    async with contextlib.AsyncExitStack() as stack:
        bed = await _testbed(stack, workdir)
        relay, daemon, nodelay = bed.relay, bed.daemon, bed.nodelay
        stack.callback(_count_disconnects, numbers, daemon)
        probe = _RelayProbe(relay.url)
        stack.push_async_callback(probe.close)

        await daemon.start()
        await probe.start()
        phone = await _pair(daemon, relay.url, "Bench phone")
        stack.push_async_callback(phone.close)
        chat = await _create_session(phone)
        bulk = await _create_session(phone)
        queue = await _create_session(phone)

        # Order matters: LocalRelay drops a connection that sends more than 6,000 events in a
        # minute, so the daemon's two big senders (the output turn and the catch-up) are on two
        # connections, before and after its restart.
        progress("live output")
        output = await run_case(
            numbers, "live output", _output(daemon, phone, probe, bulk, sync_entries)
        )
        if output is not None:
            numbers.output, seq_high = output
            progress("full sync")
            numbers.sync = await run_case(
                numbers, "full sync", _full_sync(daemon, relay.url, bulk, seq_high)
            )
        progress("restart catch-up")
        numbers.catchup = await run_case(
            numbers,
            "restart catch-up",
            _catchup(daemon, phone, queue, catchup_commands, catchup_timeout),
        )
        progress("ack latency")
        numbers.latency = await run_case(
            numbers,
            "ack latency",
            _latency(phone, probe, chat, latency_samples, nodelay=nodelay.available),
        )
        await _cancel(bed.keeper)
        if nagle_samples:
            nodelay.apply(enabled=False)
            progress("ack latency, relay as shipped")
            numbers.latency_nagle = await run_case(
                numbers,
                "ack latency (relay as shipped)",
                _latency(phone, probe, chat, nagle_samples, nodelay=False),
            )
        _phone_problems(numbers, [phone])
