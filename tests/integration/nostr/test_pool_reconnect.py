"""How fast the pool is back on a relay: after an outage longer than the backoff cap, and after
the machine wakes from suspend (a clock jump fed to the real wake watcher).

Real relays (rust-nostr LocalRelay on 127.0.0.1) and the pool's *default* backoff: these tests
measure the promise itself — back within 5 s of a relay's return, within 2 s of a wake — and
print the numbers (``pytest -s``). The jitter draw is pinned to 0 so every delay is the full
cap: the worst case, not a lucky one.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from bridge.nostr.backoff import DEFAULT_CAP
from bridge.nostr.event import sign_event
from bridge.nostr.filters import Filter
from bridge.nostr.keys import Keypair
from bridge.nostr.pool import RelayPool, RelayState
from bridge.nostr.relay import ConnectionState, PublishStatus, RelayConnection, RelayEventReceived
from bridge.runtime.edges.wake import watch_wakes
from tests.support.relay import LoopbackRelay

pytestmark = pytest.mark.timeout(90)

RelayFactory = Callable[..., Awaitable[LoopbackRelay]]
BRIDGE = Keypair.generate()
OUTAGE = 8.0
"""Seconds the relay stays down: well past the cap, so the backoff has reached it."""
RETURN_BOUND = 5.0
WAKE_BOUND = 2.0


def ignore(_: RelayEventReceived) -> None:
    pass


class Opens:
    """Counts the pool's (re)connections and when each happened (loop time)."""

    def __init__(self) -> None:
        self.times: list[float] = []
        self.changed = asyncio.Event()

    def __call__(self, _url: str) -> None:
        self.times.append(asyncio.get_running_loop().time())
        self.changed.set()

    async def wait_count(self, count: int, timeout: float) -> float:
        """Wait for the `count`-th open; its loop time."""
        async with asyncio.timeout(timeout):
            while len(self.times) < count:
                self.changed.clear()
                await self.changed.wait()
        return self.times[count - 1]


@pytest.fixture
async def pools() -> AsyncIterator[list[RelayPool]]:
    made: list[RelayPool] = []
    yield made
    for pool in made:
        await pool.close()


async def started_pool(
    pools: list[RelayPool], urls: list[str], opens: Opens, **options: Any
) -> RelayPool:
    """A pool with one subscription (as the daemon has: its EOSE resets the backoff)."""
    pool = RelayPool(urls, BRIDGE, on_event=ignore, on_open=opens, rng=lambda: 0.0, **options)
    pools.append(pool)
    await pool.subscribe("cmds", lambda: [Filter(kinds=(4515,), tags={"p": (BRIDGE.public_hex,)})])
    await pool.start()
    await opens.wait_count(1, 10)
    return pool


async def until(predicate: Callable[[], bool], timeout: float) -> None:
    """Poll a state no callback announces (5 ms steps, far below what is measured)."""
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.005)


async def test_back_within_5_s_of_a_relay_returning_after_a_long_outage(
    relay_factory: RelayFactory, pools: list[RelayPool]
) -> None:
    relay = await relay_factory(proxied=True)  # a stop really cuts the connection
    opens = Opens()
    pool = await started_pool(pools, [relay.url], opens)
    loop = asyncio.get_running_loop()

    await relay.stop()
    down_at = loop.time()
    await until(lambda: pool.status()[0].state is RelayState.CLOSED, 5)
    await asyncio.sleep(OUTAGE)
    attempts_while_down = pool.status()[0].failures
    # The worst moment to come back: an attempt has just failed and a full delay begins.
    failures = pool.status()[0].failures
    await until(lambda: pool.status()[0].failures > failures, DEFAULT_CAP + 1)
    await relay.start()
    back_at = loop.time()

    opened_at = await opens.wait_count(2, RETURN_BOUND + 5)
    took = opened_at - back_at
    print(
        f"\nrelay down {back_at - down_at:.1f} s ({attempts_while_down} attempts); "
        f"pool open again {took:.2f} s after the relay returned (bound {RETURN_BOUND:.0f} s)"
    )
    assert took < RETURN_BOUND
    # Not hammering: the drop, then attempts 1, 2, 3, 3 … s apart (jitter could only make
    # them up to 25 % closer): at most 5 failures in 8 s.
    assert 3 <= attempts_while_down <= 5
    assert pool.status()[0].state is RelayState.OPEN


async def wake_after(pool: RelayPool, clock_jump: asyncio.Event, slept: float) -> None:
    """The real watcher, on a CLOCK_BOOTTIME that jumps by `slept` once `clock_jump` is set."""

    def boottime() -> float:
        return time.monotonic() + (slept if clock_jump.is_set() else 0.0)

    await watch_wakes(lambda _: pool.reconnect_now("woke up"), boottime=boottime)


async def test_a_wake_cuts_a_long_backoff_delay_short(
    relay_factory: RelayFactory, pools: list[RelayPool]
) -> None:
    relay = await relay_factory(proxied=True)
    opens = Opens()
    # A 60 s delay, as a link could be sleeping when the lid closed (the old cap was 30 s).
    pool = await started_pool(pools, [relay.url], opens, backoff_base=60.0, backoff_cap=60.0)
    jump = asyncio.Event()
    watcher = asyncio.create_task(wake_after(pool, jump, slept=3600.0))
    try:
        await relay.stop()
        await until(lambda: pool.status()[0].failures == 1, 5)  # sleeping its 60 s
        await relay.start()
        await asyncio.sleep(1.5)  # more than a tick: the watcher sees no wake yet
        assert len(opens.times) == 1, "reconnected without a wake: the test proves nothing"

        loop = asyncio.get_running_loop()
        jump.set()
        woke_at = loop.time()
        opened_at = await opens.wait_count(2, WAKE_BOUND + 5)
    finally:
        watcher.cancel()
    took = opened_at - woke_at
    print(f"\nwake during a 60 s backoff delay: open again {took:.2f} s after the wake")
    assert took < WAKE_BOUND
    assert pool.status()[0].failures == 0  # the backoff starts over


class FreezingProxy:
    """A TCP forwarder on 127.0.0.1 whose current connections can go dead without a FIN.

    After :meth:`freeze` the connections open so far forward nothing more, in either
    direction, and are never closed: what a suspend leaves behind. New connections work.
    """

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = 0
        self._server: asyncio.Server | None = None
        self._links: dict[asyncio.Task[None], bool] = {}
        """Each connection's task, and whether it is frozen."""

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._link, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    def freeze(self) -> None:
        for task in self._links:
            self._links[task] = True

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._links):
            task.cancel()
        await asyncio.gather(*self._links, return_exceptions=True)

    async def _link(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._links[task] = False
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)

        async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            while data := await src.read(65536):
                if not self._links[task]:  # frozen: the bytes are lost on the way
                    dst.write(data)
                    await dst.drain()

        try:
            await asyncio.gather(pump(reader, up_writer), pump(up_reader, writer))
        except (OSError, asyncio.CancelledError):
            # Only close() cancels a link (asyncio's stream server would log a cancelled
            # handler as an error), so a cancelled link ends normally.
            pass
        finally:
            for w in (writer, up_writer):
                w.transport.abort()


async def test_a_wake_replaces_a_connection_that_looks_open_but_is_dead(
    relay: LoopbackRelay, pools: list[RelayPool]
) -> None:
    proxy = FreezingProxy(relay.port or 0)
    await proxy.start()
    opens = Opens()
    # Keepalive as shipped (20 s + 20 s) and a 5 s closing handshake: neither may be waited for.
    pool = await started_pool(pools, [f"ws://127.0.0.1:{proxy.port}"], opens)
    jump = asyncio.Event()
    watcher = asyncio.create_task(wake_after(pool, jump, slept=600.0))
    try:
        proxy.freeze()
        await asyncio.sleep(1.5)
        assert pool.status()[0].state is RelayState.OPEN  # dead, yet it looks open

        loop = asyncio.get_running_loop()
        jump.set()
        woke_at = loop.time()
        opened_at = await opens.wait_count(2, WAKE_BOUND + 5)
        took = opened_at - woke_at
        event = sign_event(BRIDGE, 4516, "after the wake", (), created_at=int(time.time()))
        report = await asyncio.wait_for(pool.publish(event), 5)
    finally:
        watcher.cancel()
        await proxy.close()
    print(f"\nwake with a dead connection: a new one open {took:.2f} s after the wake")
    assert took < WAKE_BOUND
    assert report.delivered  # through the new connection: the frozen one forwards nothing
    assert len(opens.times) == 2  # one reconnect for one wake


async def test_abort_drops_a_dead_connection_at_once(relay: LoopbackRelay) -> None:
    """What the pool relies on: no closing handshake waited for, pending publishes answered."""
    proxy = FreezingProxy(relay.port or 0)
    await proxy.start()
    connection = RelayConnection(f"ws://127.0.0.1:{proxy.port}", BRIDGE, close_timeout=5.0)
    try:
        await connection.connect()
        proxy.freeze()
        event = sign_event(BRIDGE, 4516, "lost", (), created_at=int(time.time()))
        publish = asyncio.create_task(connection.publish(event))
        await asyncio.sleep(0.2)
        assert not publish.done()  # the OK cannot come back through the frozen link

        loop = asyncio.get_running_loop()
        started = loop.time()
        connection.abort("woke up")
        outcome = await asyncio.wait_for(publish, 1)
        await asyncio.wait_for(connection.wait_closed(), 1)
        await connection.close()  # reaps the reader without a 5 s closing handshake
        took = loop.time() - started
        connection.abort("again")  # idempotent
    finally:
        await connection.close()
        await proxy.close()
    assert outcome.status is PublishStatus.NOT_CONNECTED
    assert connection.state is ConnectionState.CLOSED
    assert connection.close_reason == "woke up"
    assert took < 1.0


async def test_a_wake_abandons_a_handshake_that_hangs(pools: list[RelayPool]) -> None:
    """A connect from before the suspend is not waited for (its timeout is 10 s)."""
    accepted: list[asyncio.StreamWriter] = []
    arrived = asyncio.Event()

    async def never_answer(_r: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(writer)
        arrived.set()

    server = await asyncio.start_server(never_answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    pool = RelayPool([f"ws://127.0.0.1:{port}"], BRIDGE, on_event=ignore, rng=lambda: 0.0)
    pools.append(pool)
    try:
        await pool.start()
        await asyncio.wait_for(arrived.wait(), 5)
        assert pool.status()[0].state is RelayState.CONNECTING
        loop = asyncio.get_running_loop()
        started = loop.time()
        arrived.clear()
        pool.reconnect_now("woke up")
        await asyncio.wait_for(arrived.wait(), WAKE_BOUND)
        took = loop.time() - started
    finally:
        for writer in accepted:
            writer.transport.abort()
        server.close()
    print(f"\nwake during a hanging handshake: a new attempt {took * 1000:.0f} ms after")
    assert len(accepted) == 2
    assert pool.status()[0].state is RelayState.CONNECTING
