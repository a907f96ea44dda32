"""What every daemon benchmark case shares: the testbed, the timed phone, the probes, the results.

The testbed (:func:`testbed`) is the real daemon (``codedeck-bridge run`` as a subprocess,
scripted agent, on a home of its own) and a relay, one of two:

- **the test relay** (:data:`TEST_RELAY`): rust-nostr's LocalRelay on 127.0.0.1 in the bench's
  own process (:class:`~tests.support.relay.LoopbackRelay`), with ``TCP_NODELAY`` kept set on its
  sockets (:class:`RelayNoDelay`), as strfry sets it: the daemon against a neutral relay;
- **the embedded relay** (:data:`EMBEDDED_RELAY`): no relay configured, so the daemon serves its
  own (``--embedded-relay 127.0.0.1:PORT``), exactly as ``make run`` starts it: what a user runs,
  whatever implementation :mod:`bridge.runtime.edges.embedded_relay` has when the bench runs. Its write
  policy admits the bridge and its paired phones only; the probes sign accordingly.

Every daemon of the bench keeps its whole transcripts (``CODEDECK_TRANSCRIPT_KEEP_LAST=0``): the
full-sync case holds 50,000 lines in one session, past the default retention of 5,000.

Times are taken when a message *arrives* at the phone (:class:`TimedPhone` stamps each decoded
message with ``time.perf_counter()`` in the relay reader callback), not when a waiting coroutine
happens to be scheduled. Events are signed before a timer starts, for the baselines and for the
phone alike: both sides measure transport and processing, not the sender's signature.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bridge.nostr.event import VerifiedEvent, sign_event
from bridge.nostr.filters import Filter
from bridge.nostr.keys import Keypair
from bridge.nostr.nip44 import ConversationKeyCache, encrypt
from bridge.nostr.pool import RelayPool
from bridge.nostr.relay import RelayEventReceived
from bridge.protocol import CreateSessionCommand, InputAckMessage
from bridge.protocol.kinds import COMMAND_KIND, LIVE_KIND
from tests.support.daemon import DaemonProcess
from tests.support.phone import PhoneSimulator
from tests.support.phone_state import Received

if TYPE_CHECKING:
    # Types only: those modules import this one.
    from tests.bench.daemon_burst import BurstResult
    from tests.bench.daemon_load import FanoutResult, MemoryResult
    from tests.bench.daemon_scenarios import (
        CatchupResult,
        LatencyResult,
        OutputResult,
        SyncRunResult,
    )
    from tests.support.relay import LoopbackRelay

__all__ = [
    "EMBEDDED_RELAY",
    "OUTPUT_TIMEOUT",
    "TEST_RELAY",
    "TURN_OVERHEAD_ENTRIES",
    "DaemonNumbers",
    "PhoneDelivery",
    "RelayNoDelay",
    "RelayProbe",
    "RelayRun",
    "Testbed",
    "TimedPhone",
    "acks",
    "await_turn",
    "create_session",
    "delivery",
    "is_stream_end",
    "pair",
    "percentile",
    "phone_problems",
    "relay_drops",
    "run_case",
    "testbed",
    "turn_outputs",
]

TEST_RELAY = "test relay"
EMBEDDED_RELAY = "embedded relay"
OUTPUT_TIMEOUT = 60.0
LOST_END_QUIET = 5.0  # longer than the daemon's first reconnect delay (backoff base 1 s)
TURN_OVERHEAD_ENTRIES = 2  # the user entry before the lines, the stream_end entry after them
_CLOSED = re.compile(r"= ws://\S+ closed: ")
"""What the daemon logs when a relay connection of its ends."""
_STOPPING = '"message": "stopping"'
_SERVING = " serving "


def percentile(values: Sequence[float], pct: float) -> float:
    """The ``pct`` percentile (0-100) with linear interpolation between closest ranks."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("no values")
    rank = (len(ordered) - 1) * pct / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def relay_drops(log: str) -> int:
    """How often the daemon's relay connection ended while it ran (not while it stopped)."""
    drops, running = 0, True
    for line in log.splitlines():
        if _SERVING in line:
            running = True
        elif _STOPPING in line:
            running = False
        elif running and _CLOSED.search(line):
            drops += 1
    return drops


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

    def connections(self) -> tuple[tuple[str, float | None], ...]:
        """Which connection the phone has to each relay: a drop and reconnect changes it."""
        return tuple((status.state.value, status.connected_at) for status in self.relay_status())


class RelayNoDelay:
    """Sets ``TCP_NODELAY`` on the test relay's accepted sockets, as strfry (uWebSockets) does.

    rust-nostr's LocalRelay leaves Nagle's algorithm on for the connections it accepts (measured:
    ``TCP_NODELAY`` is 0 on its side, 1 on the asyncio client's). A small frame it writes right
    after another one that the client has not acknowledged yet (the client's kernel delays ACKs
    by up to 40 ms) then waits for that ACK: about 40 ms on nearly every ack of a busy session,
    which says nothing about the daemon. The relay runs in this process, on Rust threads: its
    sockets are this process's file descriptors, found in ``/proc/self/fd`` (Linux) by their
    local port.
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
class RelayRun:
    """The cases run through one relay (:data:`TEST_RELAY` or :data:`EMBEDDED_RELAY`)."""

    relay: str
    latency: LatencyResult | None = None
    output: OutputResult | None = None
    sync: SyncRunResult | None = None
    catchup: CatchupResult | None = None
    fanout: FanoutResult | None = None
    burst: BurstResult | None = None
    disconnects: int = 0
    """How often the relay dropped the one-phone daemon's connection (cases 1-4; its log)."""

    @property
    def suffix(self) -> str:
        """What a row's name ends with: nothing on the test relay, the relay's name otherwise."""
        return "" if self.relay == TEST_RELAY else f", {self.relay}"


@dataclass(slots=True)
class DaemonNumbers:
    runs: list[RelayRun] = field(default_factory=list)
    memory: MemoryResult | None = None
    memory_unavailable: bool = False
    """No ``/proc/<pid>/status`` here (not Linux): the memory case was skipped."""
    problems: list[str] = field(default_factory=list)

    def run(self, relay: str) -> RelayRun | None:
        return next((run for run in self.runs if run.relay == relay), None)


# --- phones, sessions, turns ------------------------------------------------------------------


def acks(input_id: str) -> Callable[[InputAckMessage], bool]:
    return lambda message: message.inputId == input_id


def is_stream_end(message: Any) -> bool:
    metadata = message.entry.metadata
    return isinstance(metadata, dict) and bool(metadata.get("stream_end"))


async def pair(daemon: DaemonProcess, relay_url: str, label: str) -> TimedPhone:
    opened = await daemon.call("pair.open", duration=600)
    phone = TimedPhone(relays=[relay_url], label=label)
    ack = await phone.pair(opened["url"], timeout=20)
    if not ack.message.ok:
        await phone.close()
        raise RuntimeError(f"pairing refused: {ack.message.reason}")
    await phone.wait_for("sessions", timeout=20)
    return phone


async def create_session(phone: TimedPhone) -> str:
    mark = phone.mark()
    await phone.send(CreateSessionCommand())
    ready = await phone.wait_for("session-ready", after=mark, timeout=30)
    return str(ready.message.session.id)


async def await_turn(phone: TimedPhone, mark: int) -> None:
    """Return once the turn begun after `mark` is over at `phone`, as far as it can tell."""
    try:
        await phone.wait_for("output", is_stream_end, after=mark, timeout=OUTPUT_TIMEOUT)
        # One connection keeps the order, so nothing should trail the turn's last entry; a
        # short quiet period makes sure a straggler is not counted as lost.
        await phone.quiesce(0.3, timeout=30)
    except TimeoutError:
        # The last entry itself was lost live: wait until the daemon has had time to
        # reconnect and send whatever it still had queued.
        await phone.quiesce(LOST_END_QUIET, timeout=60)


def turn_outputs(phone: TimedPhone, session: str, mark: int) -> list[Received[Any]]:
    outputs = phone.messages("output", lambda m: m.sessionId == session, after=mark)
    if not outputs:
        raise RuntimeError(f"no output of the turn reached {phone.label}")
    return outputs


async def delivery(
    phone: TimedPhone, session: str, wanted: range, mark: int, start: float
) -> PhoneDelivery:
    """How many seqs of `wanted` reached `phone` live; one sync must bring any it lacks."""
    arrivals = [phone.arrived_at[item.index] for item in turn_outputs(phone, session, mark)]
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


def phone_problems(numbers: DaemonNumbers, phones: Sequence[TimedPhone]) -> None:
    for phone in phones:
        if phone.errors or phone.violations or phone.conflicts:
            numbers.problems.append(
                f"{phone.label} saw {len(phone.errors)} error(s), {len(phone.violations)} "
                f"contract violation(s), {len(phone.conflicts)} conflict(s)"
            )


# --- the relay alone ----------------------------------------------------------------------------


class RelayProbe:
    """Two connections to the relay: one publishes pre-signed events, the other subscribes.

    Args:
        author: who signs the probe's events; on the embedded relay a writer it admits (the
            bridge's key), anyone on the test relay.
    """

    def __init__(self, relay_url: str, author: Keypair | None = None) -> None:
        self.author = author or Keypair.generate()
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
        author, since = (self.author.public_hex,), int(time.time())
        await self._reader.subscribe(
            "probe",
            lambda: (
                Filter(
                    kinds=(COMMAND_KIND, LIVE_KIND),
                    authors=author,
                    tags={"p": (self.stranger,)},
                    since=since,
                ),
            ),
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


# --- the testbed --------------------------------------------------------------------------------


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
        daemon.kill_hosts()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass(frozen=True, slots=True)
class Testbed:
    relay_kind: str
    relay_url: str
    """What phones and probes dial."""
    daemon: DaemonProcess
    relay: LoopbackRelay | None
    """The test relay (None for the embedded one, which lives and dies with the daemon)."""
    nodelay: RelayNoDelay | None


async def testbed(stack: contextlib.AsyncExitStack, directory: Path, relay_kind: str) -> Testbed:
    """A relay of `relay_kind` and a daemon (not started) with its home in `directory`.

    Cleanup, pushed on `stack`, runs in reverse order, each step even when an earlier one
    failed: the ``TCP_NODELAY`` keeper stops, the daemon stops (or is killed, hosts included),
    the test relay stops.
    """
    workspace = directory / "ws"
    workspace.mkdir(parents=True)
    env = {"CODEDECK_AGENT": "scripted", "CODEDECK_TRANSCRIPT_KEEP_LAST": "0"}
    if relay_kind == EMBEDDED_RELAY:
        port = _free_port()
        daemon = DaemonProcess(
            directory / "home",
            [],
            workspace,
            machine="benchbox",
            extra_args=["--embedded-relay", f"127.0.0.1:{port}"],
            env=env,
        )
        stack.push_async_callback(_stop_daemon, daemon)
        return Testbed(relay_kind, f"ws://127.0.0.1:{port}", daemon, None, None)

    from tests.support.relay import LoopbackRelay  # nostr_sdk is heavy: only when measuring

    relay = await stack.enter_async_context(LoopbackRelay())
    daemon = DaemonProcess(directory / "home", [relay.url], workspace, machine="benchbox", env=env)
    stack.push_async_callback(_stop_daemon, daemon)
    assert relay.port is not None
    nodelay = RelayNoDelay(relay.port)
    keeper = asyncio.create_task(nodelay.run(), name="relay-nodelay")
    stack.push_async_callback(_cancel, keeper)
    return Testbed(relay_kind, relay.url, daemon, relay, nodelay)


async def run_case(numbers: DaemonNumbers, name: str, coro: Any) -> Any:
    """Run one case; a failure is recorded and the next cases still run when they can."""
    try:
        return await coro
    except Exception as exc:
        numbers.problems.append(f"{name} failed: {type(exc).__name__}: {exc}")
        return None
