"""The daemon: the asyncio wiring of relays, store, engine, runners and the control socket.

Start-up: lock the home (one daemon per home) → open the database → load or create the identity
→ start the embedded relay when no relay is configured → build the engine from the stored state
→ connect the relay pool (subscriptions rebuilt from the engine) → resend queued durable replies
→ resume sessions → serve the control socket → ``READY=1``.

Feeding the engine. Relay events, runner events and local requests are put on one bounded queue;
one task (the *engine loop*) takes them one at a time, calls the engine, and performs the
returned effects in order before it takes the next input. Between inputs it sleeps until the
engine's next deadline and calls ``tick``. A ``Commit`` is one SQLite transaction, and nothing
after it in the list runs before it is durable.

Shutdown (SIGTERM/SIGINT), in the order of the issue: stop timers → close the pairing window →
abort syncs → close runners → drain transcript writes (the engine loop stops after its current
input) → mark sessions offline → persist → publish the final heartbeat (every session
``offline``, ``machineOffline: true``) → close the relays. Every step runs in a ``finally`` so a
failure half-way never leaves the lock held or a relay listening.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import signal
import time
import uuid
from collections.abc import Callable, Coroutine, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote

from bridge import __version__
from bridge.agents.base import RunnerError, RunnerFactory, SessionSpec
from bridge.agents.scripted import scripted_runner_factory
from bridge.config import Settings
from bridge.control.methods import (
    PairNpubResult,
    PairOpenResult,
    PairWaitResult,
    PhoneInfo,
    RelayInfo,
    SessionInfo,
    StatusResult,
    UnpairResult,
    iso_timestamp,
)
from bridge.control.server import CONTROL_SOCKET_NAME, ControlServer, ControlSocketError
from bridge.engine.core import Engine, EngineConfig, EngineState
from bridge.engine.credentials import Credentials
from bridge.engine.effects import (
    AddInbox,
    AddTombstone,
    AdvanceCursor,
    AnswerPermission,
    AppendTranscript,
    CloseRunner,
    Commit,
    CreateFolder,
    DeletePhone,
    DeleteProviderProfile,
    DeleteSession,
    DeleteTranscript,
    Dropped,
    Effect,
    FetchBlossomImage,
    InterruptRunner,
    ListModels,
    MarkProcessed,
    Notify,
    PairedPhone,
    ProbeAnthropicKey,
    ProbeProvider,
    PruneProcessed,
    Publish,
    ReadGsdState,
    RecordDecision,
    Resubscribe,
    SaveDeviceConfig,
    SaveImage,
    SavePhone,
    SaveProviderProfile,
    SaveSession,
    SendSyncChunk,
    SendToRunner,
    SessionRecord,
    SetCredential,
    SetRunnerOption,
    StartRunner,
)
from bridge.engine.gate import GateContext, Outcome, describe_decision, evaluate
from bridge.engine.inputs import (
    AgentEntry,
    AgentReady,
    CommandEventReceived,
    FolderCreated,
    FoldersScanned,
    Input,
    ModelsListed,
    PairingWindowRequested,
    PhonePairedManually,
    PhoneUnpaired,
    ToolBlocked,
)
from bridge.engine.providers import profile_from_record
from bridge.logs import register_secret
from bridge.nostr.keys import Keypair, hex_to_npub, npub_to_hex
from bridge.nostr.nip44 import ConversationKeyCache, decrypt
from bridge.nostr.pool import RelayPool
from bridge.nostr.relay import RelayEventReceived
from bridge.protocol import (
    ModelEntry,
    SessionsMessage,
    SyncChunkEntry,
    SyncChunkMessage,
    decode_as,
    diff_allowed,
)
from bridge.protocol.shared import OutputEntry
from bridge.runtime.commits import CommitWatcher, is_git_commit
from bridge.runtime.embedded_relay import EmbeddedRelay, EmbeddedRelayError
from bridge.runtime.errands import Errands
from bridge.runtime.identity import IdentityError, load_or_create_identity
from bridge.runtime.outbound import Outbound
from bridge.runtime.registration import RelayRegistration
from bridge.runtime.runners import RunnerManager
from bridge.runtime.sdnotify import Notifier
from bridge.runtime.workspace import WorkspaceError, create_folder, scan_folders
from relaypolicy.embedded import EmbeddedPolicy
from relaypolicy.pipeline import RelayPolicy
from store import accounts as accounts_store
from store import bridge_state
from store import decisions as decisions_store
from store import device_config as device_config_store
from store.db import BridgeDatabase, open_bridge_db
from store.lock import acquire_lock

__all__ = [
    "CONTROL_SOCKET_NAME",
    "Daemon",
    "DaemonError",
    "run_daemon",
    "run_watchdog",
    "watchdog_interval",
]

logger = logging.getLogger(__name__)

RELAY_DIR_NAME = "relay"
_CARD_TOOLS = frozenset({"AskUserQuestion", "ExitPlanMode", "EnterPlanMode"})
_SERVICE_ONLY_ENV = frozenset({"NOTIFY_SOCKET", "LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES"})
"""systemd's variables for the daemon itself, not for the agents it spawns."""
INPUT_BACKLOG_WARNING = 50_000
"""Inputs waiting for the engine past which a warning is logged (they are never dropped)."""
FOLDER_SCAN_INTERVAL = 30.0
OUTBOX_RETRY_AGE = 60
"""Seconds a durable reply waits in the outbox before the periodic retry sends it again."""
RETENTION_INTERVAL = 24 * 3600.0
COMMANDS_SUB = "commands"
PAIRING_SUB = "pairing"


class DaemonError(Exception):
    """The daemon cannot start or run; the message says why and what to do."""


def _record_from_dict(data: dict[str, Any]) -> SessionRecord | None:
    known = {f.name for f in dataclasses.fields(SessionRecord)}
    try:
        return SessionRecord(**{k: v for k, v in data.items() if k in known})
    except TypeError:
        return None


def _pair_url(npub: str, relays: list[str], machine: str, token: str) -> str:
    joined = ",".join(quote(r, safe="") for r in relays)
    return (
        f"codedeck://pair?npub={npub}&relays={joined}"
        f"&machine={quote(machine, safe='')}&token={quote(token, safe='')}"
    )


class Daemon:
    """One running bridge. Build with :meth:`open`, run with :meth:`serve`."""

    def __init__(
        self,
        settings: Settings,
        db: BridgeDatabase,
        keypair: Keypair,
        runner_factory: RunnerFactory | None = None,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self.db = db
        self.keypair = keypair
        self._clock = clock
        self._runner_factory = runner_factory
        self._keys = ConversationKeyCache(keypair.secret)
        # Unbounded on purpose: every input is agent output to store, a command the pool has
        # already marked as seen (a dropped one would not come back before a restart), or an
        # errand's answer. Dropping any of them loses data; a burst is worked off instead.
        self._inputs: asyncio.Queue[Input] = asyncio.Queue()
        self._backlog_warned = False
        self._wake = asyncio.Event()
        self.embedded: EmbeddedRelay | None = None
        self.pool: RelayPool | None = None
        self.engine: Engine | None = None
        self.outbound = Outbound(keypair, self._keys, settings.machine_name, db, clock=clock)
        self.runners: RunnerManager | None = None
        self.errands: Errands | None = None
        self.control: ControlServer | None = None
        self.notifier = Notifier()
        self.commits = CommitWatcher(self.feed)
        self.registration: RelayRegistration | None = None
        self._background: set[asyncio.Task[Any]] = set()
        self.started_at = clock()
        self._pair_waiters: list[asyncio.Future[PairWaitResult]] = []
        self._stopping = False
        self._public_relays: list[str] = list(settings.relays)
        self._last_status: str | None = None  # ops: STATUS= is sent only when it changes

    # --- engine plumbing --------------------------------------------------------------------------

    def feed(self, event: Input) -> None:
        """Queue an input for the engine loop (from callbacks; never blocks)."""
        self._observe(event)
        self._inputs.put_nowait(event)
        waiting = self._inputs.qsize()
        if waiting >= INPUT_BACKLOG_WARNING and not self._backlog_warned:
            self._backlog_warned = True
            logger.warning("! %d inputs wait for the engine (agents outrun the store)", waiting)
        elif waiting < INPUT_BACKLOG_WARNING // 2:
            self._backlog_warned = False

    def _observe(self, event: Input) -> None:
        """Side looks at agent events: the commit watcher starts and takes its fast path here."""
        if isinstance(event, AgentReady) and self.engine is not None:
            record = self.engine.registry.get(event.session_id)
            cwd = event.cwd or (record.cwd if record is not None else None)
            if cwd:
                committed = bool(record is not None and record.committed)
                self._spawn(self.commits.watch(event.session_id, Path(cwd), committed=committed))
        elif isinstance(event, AgentEntry):
            metadata = event.entry.metadata or {}
            tool_input = metadata.get("tool_input")
            if (
                event.entry.entryType == "tool_use"
                and metadata.get("tool_name") == "Bash"
                and isinstance(tool_input, dict)
                and is_git_commit(str(tool_input.get("command", "")))
            ):
                self._spawn(self.commits.check_soon(event.session_id))

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def _decrypt(self, author: str, payload: str) -> str:
        return decrypt(payload, self._keys.get(author))

    def _on_relay_event(self, received: RelayEventReceived) -> None:
        if received.event.kind == 4515:
            self.feed(CommandEventReceived(received.event))

    def _on_relay_open(self, url: str) -> None:
        task = asyncio.get_running_loop().create_task(self._after_reconnect(url))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _after_reconnect(self, url: str) -> None:
        try:
            await self.outbound.retry_outbox(url)
        except Exception:
            logger.exception("! retrying the outbox after %s reconnected failed", url)

    async def _engine_loop(self) -> None:
        assert self.engine is not None
        engine = self.engine
        while True:
            deadline = engine.next_deadline()
            timeout = None if deadline is None else max(0.0, deadline - self._clock())
            try:
                async with asyncio.timeout(timeout):
                    event = await self._inputs.get()
            except TimeoutError:
                await self._perform(engine.tick(self._clock()))
                continue
            try:
                effects = engine.handle(event, self._clock())
            except Exception:
                logger.exception("! engine failed on %s; input dropped", type(event).__name__)
                continue
            await self._perform(effects)

    async def _perform(self, effects: list[Effect]) -> None:
        for effect in effects:
            try:
                await self._perform_one(effect)
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception("! effect %s failed", type(effect).__name__)
                if isinstance(effect, Commit):
                    # Nothing after a failed commit may run: it depends on that state.
                    return

    async def _perform_one(self, effect: Effect) -> None:
        match effect:
            case Commit():
                await self._commit(effect)
            case Publish():
                # Durable replies travel in Commit.outbox; a bare Publish is best effort.
                self.outbound.send(self.outbound.seal(effect, durable=False))
                if isinstance(effect.message, SessionsMessage):
                    await self.outbound.save_clock()
            case SendSyncChunk():
                await self._send_sync_chunk(effect)
            case Resubscribe():
                await self._resubscribe()
            case StartRunner():
                assert self.runners is not None
                self.runners.start(
                    effect.record, resume=effect.resume, create_cwd=effect.create_cwd
                )
            case SendToRunner():
                assert self.runners is not None
                self.runners.deliver(effect.session_id)
            case InterruptRunner():
                assert self.runners is not None
                self.runners.interrupt(effect.session_id)
            case SetRunnerOption():
                assert self.runners is not None
                self.runners.set_option(effect.session_id, effect.option, effect.value)
            case CloseRunner():
                assert self.runners is not None
                self.runners.close(effect.session_id)
            case AnswerPermission():
                assert self.runners is not None
                self.runners.answer(effect)
            case ListModels():
                task = asyncio.create_task(self._list_models(), name="list-models")
                self._background.add(task)
                task.add_done_callback(self._background.discard)
            case CreateFolder():
                await self._create_folder(effect)
            case (
                ProbeProvider()
                | ProbeAnthropicKey()
                | ReadGsdState()
                | FetchBlossomImage()
                | SaveImage()
            ):
                assert self.errands is not None
                self.errands.run(effect)
            case Notify():
                self._notify(effect)
            case Dropped():
                logger.info(
                    "x dropped%s%s: %s",
                    f" {effect.event_id[:8]}" if effect.event_id else "",
                    f" from {hex_to_npub(effect.author)[:16]}" if effect.author else "",
                    effect.reason,
                )

    async def _commit(self, commit: Commit) -> None:
        sealed = [s for publish in commit.outbox for s in self.outbound.seal(publish, durable=True)]
        now = int(self._clock())
        async with self.db.transaction():
            for op in commit.ops:
                match op:
                    case MarkProcessed():
                        await bridge_state.mark_processed(self.db, op.event_id, op.created_at)
                    case AdvanceCursor():
                        await bridge_state.set_cursor(self.db, op.last_seen)
                    case SavePhone():
                        p = op.phone
                        await bridge_state.save_phone(
                            self.db, p.pubkey, p.npub, p.label, p.paired_at
                        )
                    case DeletePhone():
                        await bridge_state.delete_phone(self.db, op.pubkey)
                    case SaveSession():
                        await bridge_state.save_session(
                            self.db, op.record.session_id, dataclasses.asdict(op.record)
                        )
                    case DeleteSession():
                        await bridge_state.delete_session(self.db, op.session_id)
                    case AddTombstone():
                        await bridge_state.add_tombstone(self.db, op.session_id)
                    case AppendTranscript():
                        await bridge_state.append_transcript(
                            self.db,
                            op.session_id,
                            op.seq,
                            op.entry.model_dump_json(exclude_none=True),
                        )
                    case DeleteTranscript():
                        await bridge_state.delete_transcript(self.db, op.session_id)
                    case AddInbox():
                        await bridge_state.add_inbox(
                            self.db, op.uid, op.session_id, op.text, op.input_id, now
                        )
                    case PruneProcessed():
                        await bridge_state.prune_processed(self.db, op.before)
                    case SaveProviderProfile():
                        if token := op.record.get("authToken"):
                            register_secret(str(token))
                        await accounts_store.save_provider_profile(
                            self.db, op.profile_id, op.record
                        )
                    case DeleteProviderProfile():
                        await accounts_store.delete_provider_profile(self.db, op.profile_id)
                    case SetCredential():
                        if op.value:
                            register_secret(op.value)
                        await accounts_store.set_credential(self.db, op.name, op.value)
                    case RecordDecision():
                        await decisions_store.record_decision(
                            self.db,
                            at=op.at,
                            session_id=op.session_id,
                            tool=op.tool,
                            outcome=op.outcome,
                            reasons=op.reasons,
                            detail=op.detail,
                        )
                    case SaveDeviceConfig():
                        await device_config_store.save_device_config(self.db, op.phone, op.config)
            await self.outbound.queue_durable(sealed)
        self.outbound.send(sealed)

    async def _send_sync_chunk(self, effect: SendSyncChunk) -> None:
        low, high = effect.seq_range
        rows = await bridge_state.read_transcript(self.db, effect.session_id, low, high)
        entries = [
            SyncChunkEntry(seq=seq, entry=decode_as(OutputEntry, text)) for seq, text in rows
        ]
        message = SyncChunkMessage(
            sessionId=effect.session_id,
            syncId=effect.sync_id,
            range=[low, high],
            entries=entries,
        )
        self.outbound.send(self.outbound.seal(Publish(message, (effect.phone,)), durable=False))
        if self.engine is not None:
            self.engine.sync.chunks_sent(effect.phone, effect.sync_id, self._clock())

    async def _resubscribe(self) -> None:
        if self.pool is None or self.engine is None:
            return
        engine = self.engine
        if engine.phones:
            await self.pool.subscribe(COMMANDS_SUB, lambda: engine.command_filters(self._clock()))
        else:
            await self.pool.unsubscribe(COMMANDS_SUB)
        if engine.pairing_filters(self._clock()):
            await self.pool.subscribe(PAIRING_SUB, lambda: engine.pairing_filters(self._clock()))
        else:
            await self.pool.unsubscribe(PAIRING_SUB)

    async def _create_folder(self, effect: CreateFolder) -> None:
        try:
            path = await asyncio.to_thread(create_folder, Path(effect.root), effect.path)
        except WorkspaceError as exc:
            self.feed(FolderCreated(effect.request_id, effect.path, str(exc)))
            return
        self.feed(FolderCreated(effect.request_id, path))
        await self._scan_folders()

    async def _scan_folders(self) -> None:
        folders = await asyncio.to_thread(scan_folders, self.settings.workspaces)
        self.feed(FoldersScanned(folders))

    def _notify(self, effect: Notify) -> None:
        if effect.event == "paired":
            if self.registration is not None and effect.data.get("npub"):
                pubkey = npub_to_hex(effect.data["npub"])
                self.registration.register(pubkey, effect.data.get("label", ""))
            result: PairWaitResult = {
                "paired": True,
                "label": effect.data.get("label", ""),
                "npub": effect.data.get("npub", ""),
            }
        elif effect.event == "pairing-closed":
            result = {"paired": False, "reason": effect.data.get("reason", "closed")}
        else:
            return
        waiters, self._pair_waiters = self._pair_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(result)
        self._update_status()

    def _update_status(self) -> None:
        if not self.notifier.enabled or self.engine is None or self.pool is None:
            return
        connected = sum(1 for s in self.pool.status() if s.state.value == "open")
        text = (
            f"relays {connected}/{len(self.pool.status())} connected, "
            f"{len(self.engine.phones)} phone(s), {self.runners.running if self.runners else 0} "
            "running session(s)"
        )
        if text != self._last_status:
            self._last_status = text
            self.notifier.status(text)

    def _start_watchdog(self) -> None:
        """Start pinging systemd's watchdog when the unit asked for it (``WatchdogSec=``)."""
        interval = watchdog_interval(os.environ, os.getpid())
        if interval is None or not self.notifier.enabled:
            return
        task = asyncio.create_task(
            run_watchdog(self.notifier, interval, on_tick=self._update_status), name="watchdog"
        )
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        logger.info("systemd watchdog: WATCHDOG=1 every %.1f s from the event loop", interval)

    def _session_env(self, record: SessionRecord) -> dict[str, str] | str:
        """Variables a session's agent gets on top of the daemon's environment, or why it
        cannot start (checked at every spawn, restart and resume).

        A provider-bound session must still resolve to a usable profile (its variables are set,
        and the vendor ones scrubbed, by :meth:`_claude_env`). Otherwise a stored Anthropic key
        is used when the environment has none.
        """
        assert self.engine is not None
        accounts = self.engine.accounts
        if record.provider_id is not None:
            resolved = accounts.book.resolve_for_session(record.provider_id, record.model)
            return resolved if isinstance(resolved, str) else {}
        key = accounts.api_key
        if key and not os.environ.get("ANTHROPIC_API_KEY"):
            return {"ANTHROPIC_API_KEY": key}
        return {}

    async def _claude_env(self, spec: SessionSpec, env: Mapping[str, str]) -> Mapping[str, str]:
        """The Claude runner's environment hook: a provider-bound session runs on its profile."""
        if spec.provider_id is None or self.engine is None:
            return env
        from bridge.agents.claude import provider_env  # the SDK loads only when Claude runs

        resolved = self.engine.accounts.book.resolve_for_session(spec.provider_id, spec.model)
        if isinstance(resolved, str):
            raise RunnerError(resolved)
        return provider_env(env, resolved.base_url, resolved.token, resolved.model)

    async def _list_models(self) -> None:
        """The models for ``models-request``: a live session's, else a short-lived CLI's."""
        models: list[ModelEntry] = []
        if self.settings.agent == "scripted":
            models = [ModelEntry(id="scripted", label="Scripted test agent")]
        elif self.runners is not None:
            models = self.runners.models()
            if not models and self.settings.workspaces:
                from bridge.agents.claude import fetch_models

                try:
                    models = await fetch_models(
                        self.settings.workspaces[0], cli_path=self.settings.claude_path
                    )
                except Exception:
                    logger.exception("! listing the Claude Code models failed")
        self.feed(ModelsListed(tuple(models)))

    def _make_runner_factory(self) -> RunnerFactory:
        if self.settings.agent == "scripted":
            logger.warning(
                "sessions run the scripted test agent (agent = scripted), not Claude Code"
            )
            return scripted_runner_factory(self.settings.home / "scripted")
        try:  # ~2 s of imports: only when Claude Code runs the sessions
            from bridge.agents.claude import claude_runner_factory
        except ImportError as exc:
            raise DaemonError(
                f"the Claude Code runner cannot load ({exc}); reinstall the project "
                '(pip install -e .) or set agent = "scripted" to run without Claude Code'
            ) from None

        base_env = {
            name: value
            for name, value in os.environ.items()
            if name not in _SERVICE_ONLY_ENV and not name.startswith("WATCHDOG_")
        }

        def diff_gate() -> bool:
            return self.engine is not None and diff_allowed(self.engine.phone_caps)

        return claude_runner_factory(
            cli_path=self.settings.claude_path,
            base_env=base_env,
            env_hook=self._claude_env,
            diff_allowed=diff_gate,
            tool_check=self._tool_check,
        )

    def _tool_check(
        self, session_id: str, tool_name: str, tool_input: dict[str, Any]
    ) -> str | None:
        """The deny list in front of every tool call (Claude Code's PreToolUse hook).

        Claude Code asks ``can_use_tool`` only about calls its own rules would ask about; this
        check sees every call, so the deny list blocks in every mode. Floors and cards stay with
        the broker (``can_use_tool``), so nothing is asked twice.
        """
        engine = self.engine
        record = engine.registry.get(session_id) if engine is not None else None
        if engine is None or record is None or tool_name in _CARD_TOOLS:
            return None
        if _is_plan_file_write(tool_name, tool_input):
            return None  # Claude Code writing its own plan file in plan mode (§1.9, rule 5)
        try:
            context = GateContext(
                mode=record.permission_mode or "default",
                cwd=record.cwd,
                roots=engine.config.roots,
                home=engine.config.home,
            )
            decision = evaluate(tool_name, tool_input, context)
        except ValueError:
            return None
        if decision.outcome is Outcome.ASK and decision.reasons:
            return ("ask", describe_decision(decision))
        if decision.outcome is not Outcome.BLOCK:
            return None
        text = describe_decision(decision)
        self.feed(ToolBlocked(session_id, tool_name, decision.reasons, text))
        return ("deny", text)

    # --- timers -----------------------------------------------------------------------------------

    async def _periodic(self) -> None:
        """Every 30 s, starting 30 s after boot (boot itself scanned the folders)."""
        next_retention = self._clock()
        while True:
            await asyncio.sleep(FOLDER_SCAN_INTERVAL)
            await self._scan_folders()
            try:
                # A relay that refused or never answered a reply while staying connected gets
                # no reconnect retry: this one reaches it (see Outbound's docstring).
                await self.outbound.retry_outbox(older_than=OUTBOX_RETRY_AGE)
            except Exception:
                logger.exception("! the periodic outbox retry failed")
            if self._clock() >= next_retention:
                next_retention = self._clock() + RETENTION_INTERVAL
                await self._sweep_transcripts()
            self._update_status()

    async def _sweep_transcripts(self) -> None:
        if self.engine is None:
            return
        live = [r.session_id for r in self.engine.registry.all()]
        removed = await bridge_state.sweep_transcripts(
            self.db, self.settings.transcript_keep_last, live
        )
        if removed:
            logger.info("retention: removed %d old transcript line(s)", removed)

    # --- lifecycle --------------------------------------------------------------------------------

    async def serve(self, stop: asyncio.Event) -> None:
        """Run until `stop` is set, then shut down in order."""
        loaded = await bridge_state.load_state(self.db)
        await self.outbound.load_clock()
        profiles = [
            profile
            for profile_id, record in await accounts_store.load_provider_profiles(self.db)
            if (profile := profile_from_record(profile_id, record)) is not None
        ]
        credentials = Credentials.from_store(await accounts_store.load_credentials(self.db))
        for secret in (credentials.anthropic_api_key, credentials.github_pat):
            if secret:
                register_secret(secret)
        for profile in profiles:
            if profile.auth_token:
                register_secret(profile.auth_token)
        state = EngineState(
            phones=[PairedPhone(*row) for row in loaded.phones],
            last_seen=loaded.last_seen,
            processed=loaded.processed,
            sessions=[r for r in map(_record_from_dict, loaded.sessions) if r is not None],
            tombstones=loaded.tombstones,
            providers=profiles,
            credentials=credentials,
        )
        if self.settings.register_url and self.settings.register_token_file:
            token = _read_secret_file(self.settings.register_token_file, "register_token_file")
            register_secret(token)
            self.registration = RelayRegistration(self.settings.register_url, token)
            self.registration.register(
                self.keypair.public_hex, f"bridge {self.settings.machine_name}"
            )
        urls = list(self.settings.relays)
        if self.settings.uses_embedded_relay:
            await self._start_embedded()
            assert self.embedded is not None
            urls = [self.embedded.local_url]
            self._public_relays = [self.embedded.public_url()]
        self.engine = Engine(
            EngineConfig(
                bridge_pubkey=self.keypair.public_hex,
                machine=self.settings.machine_name,
                host="service" if os.environ.get("INVOCATION_ID") else "cli",
                relays=tuple(self._public_relays),
                roots=tuple(str(p) for p in self.settings.workspaces),
                env_api_key=os.environ.get("ANTHROPIC_API_KEY"),
                home=str(Path.home()),
            ),
            state,
            decrypt=self._decrypt,
            new_id=lambda: str(uuid.uuid4()),
            now=self._clock(),
        )
        self.runners = RunnerManager(
            self._runner_factory or self._make_runner_factory(),
            self.db,
            self.settings.workspaces,
            self.feed,
            env_for=self._session_env,
        )
        self.errands = Errands(self.feed, self.settings.workspaces)
        self.pool = RelayPool(
            urls, self.keypair, on_event=self._on_relay_event, on_open=self._on_relay_open
        )
        self.control = ControlServer(self.settings.home / CONTROL_SOCKET_NAME, self)
        loop_task: asyncio.Task[None] | None = None
        periodic: asyncio.Task[None] | None = None
        try:
            try:
                await self.control.start()
            except ControlSocketError as exc:
                raise DaemonError(str(exc)) from None
            await self.pool.start()
            self.outbound.start(self.pool)
            await self._resubscribe()
            # No outbox retry here: each relay's first open re-sends what it is missing.
            await self._scan_folders()
            await self._perform(self.engine.boot(self._clock()))
            loop_task = asyncio.create_task(self._engine_loop(), name="engine-loop")
            periodic = asyncio.create_task(self._periodic(), name="periodic")
            self._spawn(self.commits.run())
            logger.info(
                "bridge %s serving %s on %s; Ctrl-C stops it",
                self.keypair.npub,
                self.settings.machine_name,
                ", ".join(self._public_relays),
            )
            self.notifier.ready(f"serving on {', '.join(self._public_relays)}")
            self._start_watchdog()
            stopped = asyncio.create_task(stop.wait())
            done, _ = await asyncio.wait({stopped, loop_task}, return_when=asyncio.FIRST_COMPLETED)
            if loop_task in done and loop_task.exception() is not None:
                raise DaemonError(f"the engine loop crashed: {loop_task.exception()!r}")
            stopped.cancel()
        finally:
            self.notifier.stopping()
            logger.info("stopping")
            await self._shutdown(loop_task, periodic)

    async def _shutdown(
        self, loop_task: asyncio.Task[None] | None, periodic: asyncio.Task[None] | None
    ) -> None:
        for task in (periodic, loop_task):  # stop timers; the loop finishes its current input
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        background = list(self._background)
        for task in background:
            task.cancel()
        await asyncio.gather(*background, return_exceptions=True)
        for waiter in self._pair_waiters:
            if not waiter.done():
                waiter.set_result({"paired": False, "reason": "closed"})
        try:
            if self.registration is not None:
                await self.registration.close()
            if self.errands is not None:
                await self.errands.close()
            if self.runners is not None:
                await self.runners.close_all()
            if self.engine is not None:
                final = self.engine.shutdown(self._clock())
                for effect in final:
                    if isinstance(effect, Publish):
                        self.outbound.send(self.outbound.seal(effect, durable=False))
            await self.outbound.close()
            await self.outbound.save_clock()
        finally:
            if self.control is not None:
                await self.control.close()
            if self.pool is not None:
                await self.pool.close()
            if self.embedded is not None:
                await self.embedded.stop()

    async def _start_embedded(self) -> None:
        """Serve the embedded relay with the private relay's own write policy (relaypolicy),
        its registry being this daemon: the bridge and its paired phones, and the pairing
        window while one is open (rate-limited per IP, like the deployed relay)."""
        host, port = self.settings.embedded_relay
        policy = EmbeddedPolicy(RelayPolicy(_DaemonRegistry(self)), clock=self._clock)
        self.embedded = EmbeddedRelay(
            host, port, admit=policy.admit, lmdb_dir=self.settings.home / RELAY_DIR_NAME
        )
        try:
            await self.embedded.start()
        except EmbeddedRelayError as exc:
            raise DaemonError(str(exc)) from None

    # --- control socket handler ---------------------------------------------------------------------

    async def status(self) -> StatusResult:
        assert self.engine is not None and self.pool is not None
        relays: list[RelayInfo] = [
            {
                "url": s.url,
                "state": s.state.value,
                "lastEventAt": iso_timestamp(s.last_event_at) if s.last_event_at else None,
                "lastError": s.last_error,
            }
            for s in self.pool.status()
        ]
        return {
            "pid": os.getpid(),
            "startedAt": iso_timestamp(self.started_at),
            "version": __version__,
            "npub": self.keypair.npub,
            "machine": self.settings.machine_name,
            "home": str(self.settings.home),
            "relays": relays,
            "embeddedRelay": self.embedded.public_url() if self.embedded else None,
            "phones": await self.phones_list(),
            "sessions": await self.sessions_list(),
            "lastCommandAt": (
                iso_timestamp(self.engine.last_command_at) if self.engine.last_command_at else None
            ),
        }

    async def pair_open(self, duration: float) -> PairOpenResult:
        token = os.urandom(16).hex()
        now = self._clock()
        self._notify(Notify("pairing-closed", {"reason": "closed"}))
        self.feed(PairingWindowRequested(token, duration))
        if self.registration is not None:
            self.registration.open_window(self.keypair.public_hex, now, duration)
        return {
            "url": _pair_url(
                self.keypair.npub, self._public_relays, self.settings.machine_name, token
            ),
            "npub": self.keypair.npub,
            "token": token,
            "relays": list(self._public_relays),
            "machine": self.settings.machine_name,
            "expiresAt": iso_timestamp(now + duration),
        }

    async def pair_wait(self, timeout: float) -> PairWaitResult:
        if self.engine is None or (
            self.engine.window_for(self._clock()) is None and self._inputs.empty()
        ):
            return {"paired": False, "reason": "no-window"}
        waiter: asyncio.Future[PairWaitResult] = asyncio.get_running_loop().create_future()
        self._pair_waiters.append(waiter)
        try:
            async with asyncio.timeout(timeout):
                return await asyncio.shield(waiter)
        except TimeoutError:
            return {"paired": False, "reason": "timeout"}
        finally:
            if waiter in self._pair_waiters:
                self._pair_waiters.remove(waiter)

    async def pair_npub(self, pubkey: str, label: str) -> PairNpubResult:
        assert self.engine is not None
        already = pubkey in self.engine.phones
        self.feed(PhonePairedManually(pubkey, label or "Phone"))
        return {"npub": hex_to_npub(pubkey), "label": label or "Phone", "alreadyPaired": already}

    async def phones_list(self) -> list[PhoneInfo]:
        assert self.engine is not None
        return [
            {"npub": p.npub, "label": p.label, "pairedAt": p.paired_at}
            for p in sorted(self.engine.phones.values(), key=lambda p: p.paired_at)
        ]

    async def phones_unpair(self, pubkey: str) -> UnpairResult:
        assert self.engine is not None
        phone = self.engine.phones.get(pubkey)
        if phone is None:
            return {"unpaired": False, "npub": hex_to_npub(pubkey)}
        self.feed(PhoneUnpaired(pubkey))
        if self.registration is not None:
            self.registration.unregister(pubkey)
        return {"unpaired": True, "npub": phone.npub, "label": phone.label}

    async def sessions_list(self) -> list[SessionInfo]:
        assert self.engine is not None
        return [
            {"sessionId": r.session_id, "state": r.state, "title": r.title, "cwd": r.cwd}
            for r in self.engine.registry.all()
        ]


# --- systemd watchdog -----------------------------------------------------------------------------


def watchdog_interval(env: Mapping[str, str], pid: int) -> float | None:
    """Seconds between ``WATCHDOG=1`` pings: half of ``$WATCHDOG_USEC``, as sd_watchdog_enabled(3)
    advises; None when systemd asked for no watchdog.

    ``$WATCHDOG_PID``, when set, names the process the watchdog is for: another pid means the
    variables were inherited from a parent and are not ours to answer.
    """
    raw = env.get("WATCHDOG_USEC", "").strip()
    if not raw.isdigit() or int(raw) == 0:
        return None
    owner = env.get("WATCHDOG_PID", "").strip()
    if owner and (not owner.isdigit() or int(owner) != pid):
        return None
    return int(raw) / 1_000_000 / 2


async def run_watchdog(
    notifier: Notifier, interval: float, *, on_tick: Callable[[], None] | None = None
) -> None:
    """Send ``WATCHDOG=1`` every `interval` seconds until cancelled.

    The pings come from the event loop on purpose (not from a thread): a loop that is blocked or
    starved stops pinging, and systemd kills and restarts the service after ``WatchdogSec=``.
    `on_tick` (the daemon's STATUS refresh) runs after each ping; an error in it is logged and
    never stops the pings.
    """
    while True:
        notifier.watchdog()
        if on_tick is not None:
            try:
                on_tick()
            except Exception:
                logger.exception("! watchdog tick failed")
        await asyncio.sleep(interval)


def _is_plan_file_write(tool_name: str, tool_input: Mapping[str, Any]) -> bool:
    """A Write/Edit of a file in Claude Code's own ``plans`` folder (its config directory)."""
    if tool_name not in ("Write", "Edit", "MultiEdit"):
        return False
    raw = tool_input.get("file_path")
    if not isinstance(raw, str) or not raw:
        return False
    config = os.environ.get("CLAUDE_CONFIG_DIR") or str(Path.home() / ".claude")
    plans = Path(config).expanduser().resolve() / "plans"
    path = Path(raw).expanduser()
    try:
        resolved = path.resolve()
    except OSError:
        return False
    return resolved.suffix == ".md" and plans in resolved.parents


def _read_secret_file(path: Path, setting: str) -> str:
    """The first line of a private file holding a token (never echoed in errors)."""
    try:
        info = path.stat()
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise DaemonError(f"{setting}: cannot read {path} ({exc.strerror or exc})") from None
    if info.st_mode & 0o077:
        raise DaemonError(f"{setting}: {path} is readable by other users; run: chmod 600 {path}")
    token = next((line.strip() for line in text.splitlines() if line.strip()), "")
    if not token:
        raise DaemonError(f"{setting}: {path} is empty; put the relay's admin token in it")
    return token


class _DaemonRegistry:
    """relaypolicy's ``PubkeyRegistry`` answered live from the daemon: no copy to keep in sync."""

    def __init__(self, daemon: Daemon) -> None:
        self._daemon = daemon

    def is_registered(self, pubkey: str) -> bool:
        engine = self._daemon.engine
        return pubkey == self._daemon.keypair.public_hex or (
            engine is not None and pubkey in engine.phones
        )

    def pairing_window_until(self, pubkey: str) -> int | None:
        engine = self._daemon.engine
        if engine is None or pubkey != self._daemon.keypair.public_hex or engine.window is None:
            return None
        return int(engine.window.expires_at)


async def run_daemon(
    settings: Settings,
    *,
    stop: asyncio.Event | None = None,
    runner_factory: RunnerFactory | None = None,
) -> None:
    """Run until `stop` is set or SIGINT/SIGTERM arrives.

    Raises:
        DaemonError: a start-up step failed (the message names the fix).
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
            daemon = Daemon(settings, db, keypair, runner_factory)
            installed = _install_stop_signals(stop)
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


def _install_stop_signals(stop: asyncio.Event) -> list[int]:
    loop = asyncio.get_running_loop()
    installed: list[int] = []
    for signum in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(signum, stop.set)
            installed.append(signum)
    return installed
