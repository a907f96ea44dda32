"""The daemon: assembly of the runtime, the order of start and shutdown, and the signals.

Every job has a module of its own; this one only builds them and says in which order they start
and stop:

=====================  ==========================================================================
``engine_loop``        the input queue, the engine's timers, the effects in order (the data path)
``commit``             one transaction per ``Commit``: the only map from store operations to store
``outbound``           sealing and sending to the relays, the outbox and its retries
``runners``            the agent sessions' runners and the inbox hand-off
``host_runner``        one session's runner: its session host adopted or spawned, its journal
``host_launcher``      starting, finding and stopping session hosts (``host_link``: the socket)
``agent_env``          the agents' environment, runner factory, PreToolUse check and model list
``agent_probe``        whether each configured ACP agent starts (checked in the background)
``errands``            slow work answered later: probes, downloads, images, folders, models
``control_handler``    the control socket's answers and the pairing waiters
``periodic``           the 30 s work: folder scan, outbox retry, retention, status
``sdnotify``           systemd's notify protocol and the watchdog
``embedded_relay``     the embedded relay and the registry its policy asks
``push``               Web Push to phones that are away: coalescing, sending (off: ``push = false``)
``boot``               the durable state the engine is built from
=====================  ==========================================================================

Start-up: lock the home (one daemon per home) → open the database → load or create the identity
→ load the engine's state → start the embedded relay when no relay is configured → build the
engine → serve the control socket → connect the relay pool (subscriptions rebuilt from the
engine; each relay's first open re-sends the outbox) → scan the folders → stop the hosts of
sessions the store no longer has → resume sessions (adopting their hosts) → the engine loop →
the check of the ACP agents, in the background (its result joins a later heartbeat) → the
phones' commands, held until every host re-presented its cards → the periodic work and the
commit watcher → ``READY=1``.

Shutdown (SIGTERM/SIGINT, or a critical task that ended): the engine loop finishes its current
input and stops → background tasks are cancelled and awaited → pairing waiters are told
``closed`` → relay registration and errands close → the runners close their sessions' hosts, or
(``keep_sessions``: under systemd by default, ``run --keep-sessions``) let go of them, leaving
the agents running for the next start → the final heartbeat (every session
``offline``, ``machineOffline: true``) → the send queue drains → the control socket, the relays
and the embedded relay close. Every step runs in a ``finally``, so a failure half-way never
leaves the lock held or a relay listening.

One failure policy: a critical task (the engine loop, the periodic work, the outbound sender)
that ends — an engine exception, a failed commit, a bug — stops the daemon with a clear log line
and a non-zero exit (:class:`DaemonError`); systemd restarts it from the durable state. After
such a failure the farewell heartbeat is not published: the engine's memory may be ahead of the
store, and phones must not be told what the store does not hold.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import signal
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path

from bridge.agents.base import RunnerFactory
from bridge.agents.workspace_tools.leftovers import reap_host
from bridge.config import Settings
from bridge.control.server import CONTROL_SOCKET_NAME, ControlServer, ControlSocketError
from bridge.engine.agents import ConfiguredAgent
from bridge.engine.core import Engine, EngineConfig, EngineState
from bridge.engine.effects import Publish
from bridge.engine.inputs import CommandEventReceived, Input
from bridge.logs import register_secret
from bridge.nostr.keys import Keypair
from bridge.nostr.nip44 import ConversationKeyCache, decrypt
from bridge.nostr.pool import RelayPool
from bridge.nostr.relay import RelayEventReceived
from bridge.protocol.kinds import COMMAND_KIND
from bridge.push import VapidKey
from bridge.records import record
from bridge.runtime.boot import load_engine_state
from bridge.runtime.clock import Clock, SystemClock
from bridge.runtime.commit import Committer
from bridge.runtime.edges.control_handler import DaemonControl
from bridge.runtime.edges.control_tasks import DaemonTasks
from bridge.runtime.edges.embedded_relay import (
    EmbeddedRelay,
    EmbeddedRelayError,
    EngineRegistry,
    TlsFiles,
    private_relay,
)
from bridge.runtime.edges.push import PushEdge, load_or_create_vapid_key
from bridge.runtime.edges.registration import RegistrationError, RelayRegistration, read_token_file
from bridge.runtime.edges.sdnotify import Notifier, StatusReporter, run_watchdog, watchdog_interval
from bridge.runtime.edges.wake import watch_wakes
from bridge.runtime.engine_loop import EffectRunner, EngineFailure, EngineLoop
from bridge.runtime.errands.dispatch import Errands
from bridge.runtime.errands.git_commits import CommitWatcher
from bridge.runtime.hosts.agent_env import AgentEnvironment, AgentLoadError, sandbox_support_of
from bridge.runtime.hosts.launcher import HostLauncher, stop_host
from bridge.runtime.hosts.runners import DatabaseHostStore, RunnerManager
from bridge.runtime.identity import IdentityError, load_or_create_identity
from bridge.runtime.outbound import Outbound
from bridge.runtime.periodic import PeriodicWork
from bridge.runtime.subscriptions import Subscriptions
from bridge.sandbox.hidden import hidden_paths
from bridge.sandbox.probe import SandboxSupport
from bridge.tasks import TaskSet, race
from store import bridge_state
from store.db import BridgeDatabase, open_bridge_db
from store.lock import acquire_lock

__all__ = ["CONTROL_SOCKET_NAME", "Daemon", "DaemonError", "run_daemon"]

logger = logging.getLogger(__name__)

RELAY_DIR_NAME = "relay"
OUTBOX_RETRY_AGE = 60
"""Seconds a durable reply waits in the outbox before the periodic retry sends it again."""
LOOP_STOP_WAIT = 10.0
"""How long shutdown waits for the engine loop to finish its current input."""
SETTLE_TIMEOUT = 15.0
"""How long the phones' commands wait at start for the session hosts to be adopted."""


class DaemonError(Exception):
    """The daemon cannot start or run; the message says why and what to do."""


@record
class _Relays:
    """The relays the pool dials, and the ones phones are told about (the same, except for the
    embedded relay: dialled in process, announced by its public URL)."""

    dial: tuple[str, ...]
    public: tuple[str, ...]


class _HeldCommands:
    """The phones' commands from the relays, held at a start until :meth:`release`.

    A phone may answer a card the previous daemon showed; the card is back only once its
    session host re-presented it, so the commands wait for the hosts to settle, then follow
    their replay in the loop's queue (:meth:`EngineLoop.fence`).
    """

    def __init__(self, feed: Callable[[Input], None]) -> None:
        self._feed = feed
        self._held: list[CommandEventReceived] | None = []

    def on_relay_event(self, received: RelayEventReceived) -> None:
        if received.event.kind != COMMAND_KIND:
            return
        command = CommandEventReceived(received.event)
        if self._held is not None:
            self._held.append(command)
        else:
            self._feed(command)

    def release(self) -> None:
        """Feed the held commands in their order; from now on each goes straight through."""
        held, self._held = self._held or [], None
        for command in held:
            self._feed(command)


@record
class _Parts:
    """The daemon's parts, built and wired by :meth:`Daemon._assemble`, started by
    :meth:`Daemon.serve` in order."""

    engine: Engine
    loop: EngineLoop
    commits: CommitWatcher
    agents: AgentEnvironment
    runners: RunnerManager
    errands: Errands
    commands: _HeldCommands
    pool: RelayPool
    control: DaemonControl
    status: StatusReporter
    subscriptions: Subscriptions
    periodic: PeriodicWork
    server: ControlServer
    push: PushEdge | None


class Daemon:
    """One running bridge: build it, then :meth:`serve` until stopped."""

    def __init__(
        self,
        settings: Settings,
        db: BridgeDatabase,
        keypair: Keypair,
        runner_factory: RunnerFactory | None = None,
        *,
        clock: Clock | None = None,
        keep_sessions: bool | None = None,
    ) -> None:
        self.settings = settings
        # Under systemd a stop is usually a restart or an upgrade: sessions go on by default.
        self.keep_sessions = (
            keep_sessions if keep_sessions is not None else bool(os.environ.get("INVOCATION_ID"))
        )
        self.launcher = HostLauncher(settings.home)
        self.db = db
        self.keypair = keypair
        self.clock: Clock = clock or SystemClock()
        self._runner_factory = runner_factory
        self._keys = ConversationKeyCache(keypair.secret)
        self._failure: str | None = None
        self._failed = asyncio.Event()
        self._stopping = False
        self.tasks = TaskSet("daemon", logger=logger, on_critical_exit=self._critical_exit)
        self.notifier = Notifier()
        self.outbound = Outbound(
            keypair,
            self._keys,
            settings.machine_name,
            db,
            clock=self.clock.wall,
            on_critical_exit=self._critical_exit,
        )
        self.embedded: EmbeddedRelay | None = None
        self.engine: Engine | None = None
        self.registration: RelayRegistration | None = None
        self._loop_task: asyncio.Task[None] | None = None

    def _critical_exit(self, name: str, exc: BaseException | None) -> None:
        """A task the daemon cannot live without ended: stop, loudly (see the docstring)."""
        if self._stopping and exc is None:
            return  # told to stop, and it did
        if self._failure is None:
            cause = f"{exc}" if exc is not None else "it returned"
            self._failure = f"{name} stopped ({cause})"
            logger.critical(
                "x %s; the daemon stops (systemd restarts it from its durable state)",
                self._failure,
            )
        self._failed.set()

    async def serve(self, stop: asyncio.Event) -> None:
        """Run until `stop` is set or a critical task ends, then shut down in order.

        The start and the shutdown, step by step, are the module docstring's.

        Raises:
            DaemonError: a start-up step failed, or a critical task ended.
        """
        state = await load_engine_state(self.db)
        await self.outbound.load_clock()
        try:
            self._register_bridge()
            relays = await self._relays()
            sandbox = await sandbox_support_of(self.settings.sandbox)
            vapid = await load_or_create_vapid_key(self.db) if self.settings.push else None
            parts = self._assemble(state, relays, sandbox, vapid)
        except BaseException:
            await self._abandon_start()
            raise
        try:
            await self._serve_control(parts.server)
            await self._connect_relays(parts)
            await parts.errands.scan_folders()  # no outbox retry: each relay's first open re-sends
            await self._stop_orphan_hosts(parts.engine)
            await self._boot(parts.loop)
            self._loop_task = self.tasks.spawn(parts.loop.run(), "the engine loop", critical=True)
            if parts.push is not None:
                parts.push.start()
            # Agents take seconds to start: nothing waits for their check.
            self.tasks.spawn(parts.agents.check_agents(), "the ACP agents' check")
            await self._settle_hosts(parts.runners)
            parts.loop.fence()  # the commands come after the hosts' replay (InputQueue)
            parts.commands.release()
            self.tasks.spawn(parts.periodic.run(), "the periodic work", critical=True)
            parts.commits.start()
            self._announce(relays)
            self._start_watchdog(parts.status)
            await race(stop.wait(), self._failed.wait())
        finally:
            await self._shut_down(parts)
        if self._failure is not None:
            raise DaemonError(f"{self._failure}; see the log above")

    async def _abandon_start(self) -> None:
        """The start failed before the parts were built: close what it opened already (the
        relay registration's calls, the embedded relay), as the shutdown would have."""
        try:
            if self.registration is not None:
                await self.registration.close()
        finally:
            if self.embedded is not None:
                await self.embedded.stop()

    def _register_bridge(self) -> None:
        """Register with the relay operator's registry, when the settings name one."""
        settings = self.settings
        if not (settings.register_url and settings.register_token_file):
            return
        try:
            token = read_token_file(settings.register_token_file, "register_token_file")
        except RegistrationError as exc:
            raise DaemonError(str(exc)) from None
        register_secret(token)
        self.registration = RelayRegistration(settings.register_url, token)
        self.registration.register_bridge(
            self.keypair.public_hex, f"bridge {settings.machine_name}"
        )

    async def _relays(self) -> _Relays:
        """The relays to dial and to announce: the configured ones, else the embedded relay
        (started here)."""
        if not self.settings.uses_embedded_relay:
            return _Relays(tuple(self.settings.relays), tuple(self.settings.relays))
        self.embedded = await self._start_embedded()
        return _Relays((self.embedded.local_url,), (self.embedded.public_url(),))

    def _assemble(
        self, state: EngineState, relays: _Relays, sandbox: SandboxSupport, vapid: VapidKey | None
    ) -> _Parts:
        """Build every part and wire them together; nothing starts yet.

        Every part hands its inputs to the engine loop through one `feed`. The loop is built
        last (it needs the effect runner, which needs the other parts), so `feed` finds it when
        called: nothing can be fed before :meth:`serve` awaits its first start step.
        """
        settings, clock = self.settings, self.clock
        engine = self.engine = self._build_engine(state, relays, vapid)
        push = self._push_edge(engine, vapid)
        loop: EngineLoop  # built last: see above

        def feed(event: Input) -> None:
            loop.feed(event)

        commits = CommitWatcher(feed, record_of=engine.session)

        def on_agent_event(event: Input) -> None:
            commits.observe(event)
            feed(event)

        agents = AgentEnvironment(settings, engine, feed, sandbox=sandbox)
        try:
            factory = self._runner_factory or agents.runner_factory(
                self.launcher,
                DatabaseHostStore(self.db),
                log_level=logging.getLevelName(logging.getLogger().getEffectiveLevel()),
            )
        except AgentLoadError as exc:
            raise DaemonError(str(exc)) from None
        runners = RunnerManager(
            factory,
            self.db,
            settings.workspaces,
            on_agent_event,
            env_for=agents.session_env,
            hidden=engine.config.secrets,
        )
        errands = Errands(
            feed,
            settings.workspaces,
            list_models=lambda agent: agents.list_models(runners, agent),
        )
        commands = _HeldCommands(feed)
        pool = RelayPool(
            list(relays.dial),
            self.keypair,
            on_event=commands.on_relay_event,
            on_open=self.outbound.on_relay_open,
            # The embedded relay is reached in process (bridge.relay.local), not by a socket.
            dialers={self.embedded.local_url: self.embedded.dial} if self.embedded else None,
        )
        control = DaemonControl(
            engine=engine,
            pool=pool,
            keypair=self.keypair,
            machine=settings.machine_name,
            home=str(settings.home),
            public_relays=list(relays.public),
            embedded_url=self.embedded.public_url() if self.embedded else None,
            web_client_url=settings.web_client_url,
            feed=feed,
            pending_inputs=lambda: loop.pending,
            wall=clock.wall,
            registration=self.registration,
            on_change=lambda: status.refresh(),
            sandbox=agents.sandbox_summary(),
        )
        status = StatusReporter(self.notifier, lambda: control.status_line(runners.running))
        subscriptions = Subscriptions(pool, engine, clock.wall)
        effects = EffectRunner(
            db=self.db,
            committer=Committer(
                self.db, self.outbound, clock.wall, on_cursor=runners.cursor_committed
            ),
            outbound=self.outbound,
            runners=runners,
            errands=errands,
            subscriptions=subscriptions,
            notify=control.notify,
            wake=push.wake if push is not None else None,
            feed=feed,
        )
        loop = EngineLoop(engine, effects, clock)
        control.tasks = DaemonTasks(engine=engine, db=self.db, feed=feed, progress=loop.progress)
        periodic = PeriodicWork(
            scan_folders=errands.scan_folders,
            retry_outbox=lambda: self.outbound.retry_outbox(older_than=OUTBOX_RETRY_AGE),
            sweep_transcripts=lambda: self._sweep_transcripts(engine),
            refresh_status=status.refresh,
            monotonic=clock.monotonic,
        )
        server = ControlServer(settings.home / CONTROL_SOCKET_NAME, control)
        return _Parts(
            engine=engine,
            loop=loop,
            commits=commits,
            agents=agents,
            runners=runners,
            errands=errands,
            commands=commands,
            pool=pool,
            control=control,
            status=status,
            subscriptions=subscriptions,
            periodic=periodic,
            server=server,
            push=push,
        )

    def _push_edge(self, engine: Engine, vapid: VapidKey | None) -> PushEdge | None:
        """Web Push (off without a key): a phone counts as away unless it reads the embedded
        relay now; with external relays only, every subscribed phone is pushed."""
        if vapid is None:
            return None
        return PushEdge(
            self.db,
            vapid,
            bridge=self.keypair.public_hex,
            machine=self.settings.machine_name,
            wall=self.clock.wall,
            monotonic=self.clock.monotonic,
            connected=self.embedded.connected_phones if self.embedded is not None else None,
            card_open=lambda s, r: any(c.request_id == r for c in engine.pending_cards(s)),
        )

    def _build_engine(
        self, state: EngineState, relays: _Relays, vapid: VapidKey | None = None
    ) -> Engine:
        settings = self.settings
        home = str(Path.home())
        config = EngineConfig(
            bridge_pubkey=self.keypair.public_hex,
            machine=settings.machine_name,
            host="service" if os.environ.get("INVOCATION_ID") else "cli",
            relays=relays.public,
            roots=tuple(str(p) for p in settings.workspaces),
            env_api_key=os.environ.get("ANTHROPIC_API_KEY"),
            home=home,
            secrets=hidden_paths(
                home,
                str(settings.home),
                secret_files=bridge_secret_files(settings, os.environ),
                extra=settings.sandbox.hide,
                unhidden=settings.sandbox.unhide,
            ),
            agents=tuple(ConfiguredAgent(a.agent_id, a.label) for a in settings.agents),
            push_key=vapid.public_key if vapid is not None else None,
        )
        return Engine(
            config,
            state,
            decrypt=lambda author, payload: decrypt(payload, self._keys.get(author)),
            new_id=lambda: str(uuid.uuid4()),
            now=self.clock.wall(),
        )

    async def _serve_control(self, server: ControlServer) -> None:
        try:
            await server.start()
        except ControlSocketError as exc:
            raise DaemonError(str(exc)) from None

    async def _connect_relays(self, parts: _Parts) -> None:
        """Dial the relays, the send queue behind them, and the subscriptions from the engine."""
        pool = parts.pool
        await pool.start()
        # After a suspend the relays are dialled at once, not when the backoff says.
        self.tasks.spawn(watch_wakes(lambda _: pool.reconnect_now("woke up")), "the wake watch")
        self.outbound.start(pool)
        await parts.subscriptions.refresh()

    async def _boot(self, loop: EngineLoop) -> None:
        """The engine's boot effects: resume the sessions (adopting their hosts), announce."""
        try:
            await loop.boot()
        except EngineFailure as exc:
            # Memory may be ahead of the store: no farewell heartbeat (see the docstring).
            self._critical_exit("the boot", exc)
            raise DaemonError(f"the boot stopped ({exc}); see the log above") from exc

    async def _settle_hosts(self, runners: RunnerManager) -> None:
        """Wait for the hosts to re-present their cards: a phone's answer must find its card."""
        if not await runners.settle(SETTLE_TIMEOUT):
            logger.warning(
                "! not every session host was adopted within %.0f s; phones' commands "
                "go through anyway",
                SETTLE_TIMEOUT,
            )

    def _announce(self, relays: _Relays) -> None:
        """The log line that says the bridge serves, and ``READY=1``."""
        logger.info(
            "bridge %s serving %s on %s; Ctrl-C stops it (%s)",
            self.keypair.npub,
            self.settings.machine_name,
            ", ".join(relays.public),
            "its sessions keep running"
            if self.keep_sessions
            else "and stops its sessions' agents; run --keep-sessions to leave them working",
        )
        self.notifier.ready(f"serving on {', '.join(relays.public)}")

    async def _shut_down(self, parts: _Parts) -> None:
        """Stop in the module docstring's order; the sockets and relays close whatever failed."""
        self.notifier.stopping()
        logger.info("stopping")
        try:
            await self._stop_loop(parts.loop, self._loop_task)
            await self.tasks.close()
            if parts.push is not None:
                await parts.push.close()
            await parts.commits.close()
            parts.control.close()
            await self._close_parts(parts.engine, parts.runners, parts.errands)
        finally:
            await parts.server.close()
            await parts.pool.close()
            if self.embedded is not None:
                await self.embedded.stop()

    async def _stop_loop(self, loop: EngineLoop, task: asyncio.Task[None] | None) -> None:
        """Let the engine loop finish its current input, then stop it (cancel if it hangs)."""
        self._stopping = True
        loop.stop()
        if task is None or task.done():
            return
        done, _ = await asyncio.wait({task}, timeout=LOOP_STOP_WAIT)
        if not done:
            logger.warning(
                "! the engine loop did not stop within %.0f s; cancelled", LOOP_STOP_WAIT
            )

    async def _close_parts(self, engine: Engine, runners: RunnerManager, errands: Errands) -> None:
        if self.registration is not None:
            await self.registration.close()
        await errands.close()
        if self.keep_sessions:
            logger.info("sessions keep running in their hosts; the next start adopts them")
        await runners.close_all(keep=self.keep_sessions)
        if self._failure is None:
            for effect in engine.shutdown(self.clock.wall()):
                if isinstance(effect, Publish):
                    self.outbound.send(self.outbound.seal(effect, durable=False))
        await self.outbound.close()
        await self.outbound.save_clock()

    async def _stop_orphan_hosts(self, engine: Engine) -> None:
        """Hosts of sessions the bridge no longer has (closed while they could not be told)."""
        known = {record.session_id for record in engine.session_records()}
        for paths in self.launcher.orphans(known):
            logger.info("stopping the session host in %s: its session is gone", paths.root.name)
            await stop_host(paths)
            reap_host(paths.root)  # commands a dead host left running
            shutil.rmtree(paths.root, ignore_errors=True)

    async def _start_embedded(self) -> EmbeddedRelay:
        """The embedded relay, its write policy asking the engine who may write."""
        host, port = self.settings.embedded_relay
        registry = EngineRegistry(self.keypair.public_hex, lambda: self.engine)
        relay = private_relay(
            host,
            port,
            registry=registry,
            database_dir=self.settings.home / RELAY_DIR_NAME,
            clock=self.clock.wall,
            max_stored_bytes=self.settings.embedded_relay_max_mb * 1024 * 1024,
            bridge_pubkey=self.keypair.public_hex,
            tls=TlsFiles.of(self.settings.embedded_relay_cert, self.settings.embedded_relay_key),
            relays=self.settings.relays,
        )
        try:
            await relay.start()
        except EmbeddedRelayError as exc:
            raise DaemonError(str(exc)) from None
        return relay

    def _start_watchdog(self, status: StatusReporter) -> None:
        """Start pinging systemd's watchdog when the unit asked for it (``WatchdogSec=``)."""
        interval = watchdog_interval(os.environ, os.getpid())
        if interval is None or not self.notifier.enabled:
            return
        self.tasks.spawn(
            run_watchdog(self.notifier, interval, on_tick=status.refresh), "the watchdog"
        )
        logger.info("systemd watchdog: WATCHDOG=1 every %.1f s from the event loop", interval)

    async def _sweep_transcripts(self, engine: Engine) -> None:
        live = [r.session_id for r in engine.session_records()]
        removed = await bridge_state.sweep_transcripts(
            self.db, self.settings.transcript_keep_last, live
        )
        if removed:
            logger.info("retention: removed %d old transcript line(s)", removed)


async def run_daemon(
    settings: Settings,
    *,
    stop: asyncio.Event | None = None,
    runner_factory: RunnerFactory | None = None,
    keep_sessions: bool | None = None,
    install_signals: bool = True,
) -> None:
    """Run until `stop` is set or SIGINT/SIGTERM arrives.

    `install_signals` False leaves SIGINT/SIGTERM to the caller: ``codedeck-bridge desiide``
    runs the daemon in its own process when none runs, and stops it itself after its tasks.

    Raises:
        DaemonError: a start-up step failed, or the daemon stopped on a failure (the message
            names the fix or the cause).
        StoreError: the home or database cannot be used (its message names the fix).
    """
    stop = stop if stop is not None else asyncio.Event()
    lock = acquire_lock(settings.home)
    try:
        db = await open_bridge_db(settings.home)
        try:
            try:
                keypair = await load_or_create_identity(db, settings.key_file)
            except IdentityError as exc:
                raise DaemonError(str(exc)) from None
            register_secret(keypair.secret_hex)
            register_secret(keypair.nsec)
            daemon = Daemon(settings, db, keypair, runner_factory, keep_sessions=keep_sessions)
            installed = _install_stop_signals(stop) if install_signals else []
            try:
                await daemon.serve(stop)
            finally:
                loop = asyncio.get_running_loop()
                for signum in installed:
                    loop.remove_signal_handler(signum)
        finally:
            await db.close()
    finally:
        lock.release()


def bridge_secret_files(settings: Settings, env: Mapping[str, str]) -> tuple[str, ...]:
    """The files outside the bridge home the bridge reads secrets from: hidden from every agent.

    The key file, the relay registration token file, and systemd's credential directory (where
    ``LoadCredential=`` puts the nsec) when the daemon runs with one.
    """
    candidates = (settings.key_file, settings.register_token_file, env.get("CREDENTIALS_DIRECTORY"))
    return tuple(str(path) for path in candidates if path)


def _install_stop_signals(stop: asyncio.Event) -> list[int]:
    loop = asyncio.get_running_loop()
    installed: list[int] = []
    for signum in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(signum, stop.set)
            installed.append(signum)
    return installed
