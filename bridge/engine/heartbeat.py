"""The heartbeat: the ``sessions`` message every phone keeps as the bridge's state (30515).

Rules (PROTOCOL-v10-wire.md §6, REFERENCE-BEHAVIOUR §1.10):

- It is republished every :data:`~bridge.engine.host.HEARTBEAT_INTERVAL` seconds while a phone is paired, and soon
  after anything it shows changed. Changes are *marked dirty* and published together once
  :data:`~bridge.engine.host.HEARTBEAT_DEBOUNCE` seconds passed since the first of them: a burst of agent events
  costs one heartbeat, and its strictly increasing ``created_at`` stays real time.
- It lists every session but the pending ones, with the folders of the workspace roots, the
  tombstones of closed sessions, the protocol version and the capabilities really implemented,
  and (additive, v11's shape) the agents sessions can run (:mod:`bridge.engine.agents`); with
  push on, the capability ``push`` and the VAPID key phones subscribe with (``pushKey``).
- The shutdown heartbeat marks every session ``offline`` and the machine ``machineOffline``.
- Nothing is published while no phone is paired (the timer still runs).

Pure: the clock is ``now``; the heartbeat goes out as a best-effort ``Publish`` (a lost one is
replaced within a minute).
"""

from __future__ import annotations

from bridge.engine.agents import AgentCatalog
from bridge.engine.effects import Effect, Publish, SessionRecord
from bridge.engine.host import EngineConfig
from bridge.engine.phones.accounts import Accounts
from bridge.engine.phones.paired import PhoneBook
from bridge.engine.sessions.rules import to_remote_info
from bridge.engine.state import SessionTable
from bridge.protocol import PROTOCOL_VERSION, PUSH, RemoteSessionInfo, SessionsMessage

__all__ = ["Heartbeat"]


class Heartbeat:
    """The heartbeat's timer, its dirty mark and its message."""

    def __init__(
        self,
        config: EngineConfig,
        sessions: SessionTable,
        phones: PhoneBook,
        accounts: Accounts,
        agents: AgentCatalog,
        now: float,
    ) -> None:
        self._config = config
        self._sessions = sessions
        self._phones = phones
        self._accounts = accounts
        self._agents = agents
        self._due_at = now
        self._dirty_since: float | None = None
        self.folders: tuple[str, ...] = ()

    def mark_dirty(self, now: float) -> None:
        """Something the heartbeat shows changed: publish it after the debounce."""
        if self._dirty_since is None:
            self._dirty_since = now

    def set_folders(self, folders: tuple[str, ...], now: float) -> None:
        if folders != self.folders:
            self.folders = folders
            self.mark_dirty(now)

    def next_deadline(self) -> float | None:
        if not self._phones:
            return None
        if self._dirty_since is not None:
            return min(self._due_at, self._dirty_since + self._config.heartbeat_debounce)
        return self._due_at

    def tick(self, now: float) -> list[Effect]:
        """The heartbeat, when the interval or the debounce ran out."""
        if not self._phones:
            return []
        debounced = (
            self._dirty_since is not None
            and now >= self._dirty_since + self._config.heartbeat_debounce
        )
        if now >= self._due_at or debounced:
            return self.publish(now)
        return []

    def publish(self, now: float) -> list[Effect]:
        """Publish now (and restart the interval); nothing while no phone is paired."""
        self._due_at = now + self._config.heartbeat_interval
        self._dirty_since = None
        if not self._phones:
            return []
        return [Publish(self.message(), self._phones.audience())]

    def info(self, record: SessionRecord, *, offline: bool = False) -> RemoteSessionInfo:
        """The wire view of one session (with its provider's label)."""
        book = self._accounts.book
        label = book.label_of(record.provider_id) if record.provider_id else None
        return to_remote_info(record, offline=offline, provider_label=label)

    def message(self, *, offline: bool = False) -> SessionsMessage:
        """The ``sessions`` message as of now (``offline``: the goodbye at shutdown)."""
        roots = list(self._config.roots)
        push_key = self._config.push_key
        capabilities = list(self._agents.capabilities(self._config.capabilities))
        if push_key is not None:
            capabilities.append(PUSH)
        return SessionsMessage(
            machine=self._config.machine,
            host=self._config.host,
            sessions=[self.info(r, offline=offline) for r in self._sessions.listed()],
            protocolVersion=PROTOCOL_VERSION,
            capabilities=capabilities,
            folders=list(self.folders) if roots else None,
            roots=roots or None,
            removedSessions=list(self._sessions.tombstones) or None,
            machineOffline=True if offline else None,
            agents=self._agents.descriptors(),
            pushKey=push_key,
        )
