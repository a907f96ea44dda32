"""Builders and fakes for the in-process runtime tier: the real runtime classes, one event loop.

What is real: the engine (real crypto and codec), the SQLite database (``open_bridge_db`` in a
temporary home), the ``Committer``, ``Outbound``, ``RunnerManager``, ``Errands``,
``EffectRunner`` and ``EngineLoop`` of :mod:`bridge.runtime`. What is fake: the relay pool
(:class:`FakePool`, answers per relay decided by the test), the clock (:class:`FakeClock`, moved
by hand) and the agents (:class:`FakeAgents` makes :class:`FakeRunner` s that record every call
and answer ``received()`` from a durable set the test controls).

Waiting. The runtime owns its background work in :class:`~bridge.tasks.TaskSet` s and offers no
public "wait until idle"; :func:`finished` and :func:`sent` reach into those private sets (and the
outbound queue) so a test waits for exactly the work it started, without sleeping.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bridge.agents.base import AgentEvent, Emit, RunnerError, SessionSpec
from bridge.engine.core import Engine, EngineConfig, EngineState
from bridge.engine.effects import Notify, PairedPhone, SessionRecord
from bridge.engine.inputs import AgentOptionSet, AgentReady, CommandEventReceived, Input
from bridge.nostr.event import Event, sign_event
from bridge.nostr.keys import Keypair
from bridge.nostr.nip44 import ConversationKeyCache, conversation_key, decrypt, encrypt
from bridge.nostr.pool import FiltersFactory, PublishReport, RelayState, RelayStatus
from bridge.nostr.relay import PublishOutcome, PublishStatus
from bridge.protocol import BridgeToPhone, PhoneToBridge, decode_bridge_to_phone, encode
from bridge.protocol.kinds import command_tags
from bridge.runtime.commit import Committer
from bridge.runtime.engine_loop import EffectRunner, EngineLoop
from bridge.runtime.errands.dispatch import Errands, ModelLister
from bridge.runtime.hosts.runners import RunnerManager
from bridge.runtime.outbound import Outbound
from bridge.runtime.subscriptions import Subscriptions
from store.db import BridgeDatabase

BRIDGE = Keypair.from_secret("11" * 32)
PHONE = Keypair.from_secret("22" * 32)
PHONE_2 = Keypair.from_secret("44" * 32)
STRANGER = Keypair.from_secret("33" * 32)
NOW = 1_800_000_000.0
MONOTONIC = 5_000.0
MACHINE = "box"
RELAY_A = "wss://relay-a.test"
RELAY_B = "wss://relay-b.test"
WAIT = 5.0
"""Upper bound for any wait on work the test started (a hang fails instead of blocking)."""


# --- the clock -------------------------------------------------------------------------------


class FakeClock:
    """Wall and monotonic time, moved only by :meth:`advance` (or by setting them)."""

    def __init__(self, wall: float = NOW, monotonic: float = MONOTONIC) -> None:
        self.now = wall
        self.mono = monotonic

    def wall(self) -> float:
        return self.now

    def monotonic(self) -> float:
        return self.mono

    def advance(self, seconds: float) -> None:
        self.now += seconds
        self.mono += seconds


# --- the relay pool --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Published:
    """One call of :meth:`FakePool.publish`."""

    event: Event
    relays: tuple[str, ...] | None
    """The ``relays=`` argument (None: every relay)."""


Answer = PublishStatus | tuple[PublishStatus, str]
"""A relay's answer: a status, or a status with the relay's message (``OK false`` reasons)."""


class FakePool:
    """The part of :class:`~bridge.nostr.pool.RelayPool` the runtime calls.

    Args:
        urls: the pool's relays.
        answers: each relay's answer to every publish (default: ACCEPTED); change it any time.

    Attributes:
        hold: when set to an unset event, every publish waits for it before answering (the
            event is "with the relays", not yet answered).
        defer_settle: keep ``on_settled`` callbacks in :attr:`unsettled` instead of calling
            them when the publish returns (a relay whose OK comes later).
        on_publish: awaited with each event before it is answered (to look at the store then).
        fail_with: raised by the next publish (once).
    """

    def __init__(
        self,
        urls: Sequence[str] = (RELAY_A,),
        answers: dict[str, Answer] | None = None,
    ) -> None:
        self._urls = tuple(urls)
        self.answers: dict[str, Answer] = dict(answers or {})
        self.published: list[Published] = []
        self.hold: asyncio.Event | None = None
        self.defer_settle = False
        self.unsettled: list[tuple[Callable[[PublishReport], None], PublishReport]] = []
        self.on_publish: Callable[[Event], Awaitable[None]] | None = None
        self.fail_with: BaseException | None = None
        self.subscriptions: dict[str, FiltersFactory] = {}
        self.unsubscribed: list[str] = []
        self.states: dict[str, RelayState] = dict.fromkeys(self._urls, RelayState.OPEN)
        self._taken = asyncio.Event()

    @property
    def urls(self) -> tuple[str, ...]:
        return self._urls

    async def publish(
        self,
        event: Event,
        *,
        wait_all: bool = False,
        relays: Collection[str] | None = None,
        on_settled: Callable[[PublishReport], None] | None = None,
    ) -> PublishReport:
        self.published.append(Published(event, None if relays is None else tuple(relays)))
        self._taken.set()
        if self.fail_with is not None:
            exc, self.fail_with = self.fail_with, None
            raise exc
        if self.on_publish is not None:
            await self.on_publish(event)
        if self.hold is not None:
            await self.hold.wait()
        targets = [url for url in self._urls if relays is None or url in relays]
        report = PublishReport(event.id, tuple(self._outcome(url) for url in targets))
        if on_settled is not None:
            if self.defer_settle:
                self.unsettled.append((on_settled, report))
            else:
                on_settled(report)
        return report

    def _outcome(self, url: str) -> PublishOutcome:
        answer = self.answers.get(url, PublishStatus.ACCEPTED)
        status, message = answer if isinstance(answer, tuple) else (answer, "")
        return PublishOutcome(url, status, message)

    async def subscribe(self, subscription_id: str, filters_factory: FiltersFactory) -> None:
        self.subscriptions[subscription_id] = filters_factory

    async def unsubscribe(self, subscription_id: str) -> None:
        self.unsubscribed.append(subscription_id)
        self.subscriptions.pop(subscription_id, None)

    def status(self) -> tuple[RelayStatus, ...]:
        return tuple(
            RelayStatus(
                url=url,
                state=self.states[url],
                last_event_at=None,
                last_error=None,
                connected_at=None,
                next_attempt_at=None,
                failures=0,
            )
            for url in self._urls
        )

    async def wait_published(self, count: int) -> None:
        """Until `count` publishes were made (the sender task took them)."""
        async with asyncio.timeout(WAIT):
            while len(self.published) < count:
                self._taken.clear()
                await self._taken.wait()

    def events(self) -> list[Event]:
        return [p.event for p in self.published]


# --- waiting for the runtime's own background work -------------------------------------------


async def finished(owner: object) -> None:
    """Until every task of `owner`'s private TaskSet ended (RunnerManager, Errands, …)."""
    tasks = owner._tasks  # type: ignore[attr-defined]
    assert await tasks.drain(timeout=WAIT), f"{tasks.owner} did not finish"


async def sent(outbound: Outbound) -> None:
    """Until the outbound queue is empty, its publishes and re-sends answered and its
    bookkeeping done."""
    async with asyncio.timeout(WAIT):
        await outbound._queue.join()
    assert await outbound._in_flight.drain(timeout=WAIT)  # those started without the queue too
    assert await outbound._resends.drain(timeout=WAIT)
    assert await outbound._work.drain(timeout=WAIT)


# --- events and messages ---------------------------------------------------------------------


def command_event(
    message: PhoneToBridge | str,
    *,
    author: Keypair = PHONE,
    created_at: float = NOW,
    to: Keypair = BRIDGE,
) -> CommandEventReceived:
    """A signed, NIP-44-encrypted 4515 from `author`, as the pool hands it over."""
    text = message if isinstance(message, str) else encode(message)
    key = conversation_key(author.secret, bytes.fromhex(to.public_hex))
    tags = command_tags(to.public_hex, int(created_at))
    event = sign_event(author, 4515, encrypt(text, key), tags, created_at=int(created_at))
    return CommandEventReceived(event)


def opened(event: Event, phone: Keypair = PHONE) -> BridgeToPhone:
    """What `phone` reads in an event the bridge sent it (decrypt + decode)."""
    key = conversation_key(phone.secret, bytes.fromhex(event.pubkey))
    return decode_bridge_to_phone(decrypt(event.content, key))


def tag(event: Event, name: str) -> str | None:
    """The value of the first `name` tag."""
    return next((t[1] for t in event.tags if t and t[0] == name), None)


def paired(*phones: Keypair) -> list[PairedPhone]:
    return [
        PairedPhone(p.public_hex, p.npub, f"phone-{i}", "2026-01-01T00:00:00.000Z")
        for i, p in enumerate(phones)
    ]


def ids(prefix: str = "id") -> Iterator[str]:
    for n in itertools.count(1):
        yield f"{prefix}-{n:04d}"


def make_engine(
    *,
    phones: Sequence[Keypair] = (PHONE,),
    roots: Sequence[str] = ("/ws",),
    now: float = NOW,
    new_id: Callable[[], str] | None = None,
    **state: Any,
) -> Engine:
    """A real engine (as tests/engine/test_core.py builds one), paired with `phones`."""
    keys = ConversationKeyCache(BRIDGE.secret)
    counter = ids()
    return Engine(
        EngineConfig(
            bridge_pubkey=BRIDGE.public_hex,
            machine=MACHINE,
            relays=(RELAY_A,),
            roots=tuple(roots),
        ),
        EngineState(phones=paired(*phones), **state),
        decrypt=lambda author, payload: decrypt(payload, keys.get(author)),
        new_id=new_id or (lambda: next(counter)),
        now=now,
    )


def make_outbound(db: BridgeDatabase, clock: FakeClock) -> Outbound:
    return Outbound(BRIDGE, ConversationKeyCache(BRIDGE.secret), MACHINE, db, clock=clock.wall)


def session_record(session_id: str = "s-1", cwd: str = "", **fields: Any) -> SessionRecord:
    return SessionRecord(
        session_id, cwd, "2026-01-01T00:00:00.000Z", "2026-01-01T00:00:00Z", **fields
    )


# --- agents ----------------------------------------------------------------------------------


@dataclass
class AgentScript:
    """How the next runners :class:`FakeAgents` makes behave."""

    ready: bool = True
    """``start`` emits ``AgentReady`` (with no cwd, so the manager fills in the resolved one)."""
    model: str | None = "fake-model"
    start_error: BaseException | None = None
    send_error: Callable[[str], RunnerError | None] = lambda uid: None
    """Decides per uid whether ``send_input`` raises (before the agent durably got it)."""
    on_send: Callable[[str, str], Awaitable[None]] | None = None
    """Awaited inside ``send_input`` (to look at the store from the agent's side)."""
    close_error: BaseException | None = None
    option_result: Callable[[str, str], str | None] = lambda option, value: value
    models: list[Any] = field(default_factory=list)


class FakeRunner:
    """A :class:`~bridge.agents.base.Runner` that records calls (see :class:`FakeAgents`)."""

    def __init__(self, agents: FakeAgents, session_id: str, emit: Emit) -> None:
        self._agents = agents
        self.session_id = session_id
        self.emit = emit
        self.script = agents.script
        self.calls: list[tuple[Any, ...]] = []
        self.closed = False

    @property
    def inputs(self) -> list[tuple[str, str]]:
        """(uid, text) of every ``send_input`` call, in order."""
        return [(c[1], c[2]) for c in self.calls if c[0] == "send_input"]

    async def start(self, spec: SessionSpec, *, resume: bool) -> None:
        self.calls.append(("start", spec, resume))
        if self.script.start_error is not None:
            raise self.script.start_error
        if self.script.ready:
            self.emit(self._ready())

    def _ready(self) -> AgentEvent:
        return AgentReady(self.session_id, f"sdk-{self.session_id}", self.script.model)

    async def send_input(self, uid: str, text: str) -> None:
        self.calls.append(("send_input", uid, text))
        if self.script.on_send is not None:
            await self.script.on_send(uid, text)
        error = self.script.send_error(uid)
        if error is not None:
            raise error
        self._agents.durable.setdefault(self.session_id, set()).add(uid)

    async def received(self, uids: Collection[str]) -> set[str]:
        self.calls.append(("received", sorted(uids)))
        return set(uids) & self._agents.durable.get(self.session_id, set())

    async def interrupt(self) -> None:
        self.calls.append(("interrupt",))

    async def set_option(self, option: str, value: str) -> str | None:
        self.calls.append(("set_option", option, value))
        result = self.script.option_result(option, value)
        self.emit(AgentOptionSet(self.session_id, option, value, result))
        return result

    async def answer_permission(
        self,
        request_id: str,
        allow: bool,
        *,
        message: str = "",
        always: bool = False,
        updated_input: dict[str, Any] | None = None,
    ) -> None:
        self.calls.append(("answer_permission", request_id, allow, message, always, updated_input))

    async def close(self) -> None:
        self.calls.append(("close",))
        self.closed = True
        if self.script.close_error is not None:
            raise self.script.close_error

    async def detach(self) -> None:
        self.calls.append(("detach",))
        self.closed = True

    def models(self) -> list[Any]:
        return list(self.script.models)


class FakeAgents:
    """The runner factory: every runner it made, and what each session's agent durably holds.

    ``durable`` outlives the runners (and the RunnerManager): it is the agent's own record that
    ``received()`` answers from after a daemon crash.
    """

    def __init__(self) -> None:
        self.script = AgentScript()
        self.made: list[FakeRunner] = []
        self.durable: dict[str, set[str]] = {}
        self.factory_error: BaseException | None = None

    def factory(self, session_id: str, emit: Emit) -> FakeRunner:
        if self.factory_error is not None:
            raise self.factory_error
        runner = FakeRunner(self, session_id, emit)
        self.made.append(runner)
        return runner

    def runner(self, session_id: str) -> FakeRunner:
        """The last runner made for `session_id`."""
        return [r for r in self.made if r.session_id == session_id][-1]


# --- the whole data path ---------------------------------------------------------------------


@dataclass
class Stack:
    """Engine → loop → effects → commit/outbound/runners/errands over one fake pool."""

    db: BridgeDatabase
    clock: FakeClock
    pool: FakePool
    engine: Engine
    outbound: Outbound
    committer: Committer
    runners: RunnerManager
    errands: Errands
    effects: EffectRunner
    loop: EngineLoop
    agents: FakeAgents
    workspace: Path
    fed: list[Input] = field(default_factory=list)
    """Inputs the runtime fed back (runners, errands, sync): :meth:`pump` hands them to the loop."""
    notified: list[Notify] = field(default_factory=list)

    async def handle(self, event: Input) -> None:
        await self.loop.handle(event)

    async def pump(self) -> None:
        """Let background work finish and handle what it fed back, until nothing is left."""
        for _ in range(50):
            await finished(self.runners)
            await finished(self.errands)
            await sent(self.outbound)
            if not self.fed:
                return
            while self.fed:
                await self.loop.handle(self.fed.pop(0))
        raise AssertionError("the runtime kept feeding inputs")


@contextlib.asynccontextmanager
async def make_stack(
    db: BridgeDatabase,
    workspace: Path,
    *,
    pool: FakePool | None = None,
    clock: FakeClock | None = None,
    phones: Sequence[Keypair] = (PHONE,),
    list_models: ModelLister | None = None,
) -> AsyncIterator[Stack]:
    """The runtime wired as the daemon wires it (daemon.py ``serve``), minus sockets."""
    clock = clock or FakeClock()
    pool = pool or FakePool()
    workspace.mkdir(parents=True, exist_ok=True)
    engine = make_engine(phones=phones, roots=(str(workspace),), now=clock.wall())
    outbound = make_outbound(db, clock)
    agents = FakeAgents()
    fed: list[Input] = []
    notified: list[Notify] = []
    runners = RunnerManager(agents.factory, db, [workspace], fed.append)
    errands = Errands(fed.append, [workspace], list_models=list_models)
    committer = Committer(db, outbound, clock.wall)
    effects = EffectRunner(
        db=db,
        committer=committer,
        outbound=outbound,
        runners=runners,
        errands=errands,
        subscriptions=Subscriptions(pool, engine, clock.wall),  # type: ignore[arg-type]
        notify=notified.append,
        feed=fed.append,
    )
    loop = EngineLoop(engine, effects, clock)
    await outbound.load_clock()
    outbound.start(pool)  # type: ignore[arg-type]
    stack = Stack(
        db=db,
        clock=clock,
        pool=pool,
        engine=engine,
        outbound=outbound,
        committer=committer,
        runners=runners,
        errands=errands,
        effects=effects,
        loop=loop,
        agents=agents,
        workspace=workspace,
        fed=fed,
        notified=notified,
    )
    try:
        yield stack
    finally:
        if pool.hold is not None:
            pool.hold.set()
        await errands.close()
        await runners.close_all()
        await outbound.close(drain_timeout=1.0)


async def rows(db: BridgeDatabase, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    return await db.fetchall(sql, tuple(params))
