"""The commit: the one place where the engine's store operations become store calls.

Rule 1 of :mod:`bridge.engine.effects`: a ``Commit`` is ONE SQLite transaction, and nothing after
it runs before it is durable. :meth:`Committer.commit` turns every operation of the commit into
its statements, in order, adds the commit's durable replies as outbox rows, runs them all as one
transaction, and only then hands those replies to the sender. So a command's ``MarkProcessed``,
its state change, its inbox row and its ``input-ack`` are all durable together, or none of them
is.

Group commit. The engine loop may hand several commits at once (:meth:`Committer.prepare` each,
:meth:`Committer.write` the group, :meth:`Committer.release` each): they are ONE transaction, so
either all of them are durable or none is, and nothing any of them sends leaves before all are.
That only ever delays a reply; it cannot send one early. It is what makes a busy session's
thousands of transcript lines a few transactions instead of thousands.

One trip. The whole transaction is built first (the statements are plain values) and runs in one
trip to the store's connection thread (``BridgeDatabase.write``): the trips, not SQLite, are the
cost (a trip per statement would be several for one transcript line).

Overwritten writes are left out (:func:`live_ops`). Each record of a session host moves the
session's ``agent_seq`` and most also save its whole record, so a group of a busy session's
records would rewrite the same row over and over (several times per command in a restart
catch-up). Only the last write of a row stands when the transaction ends and no statement reads
the row before that, so the earlier ones are dropped; the transaction leaves exactly the rows the
full sequence would.

The mapping from operation to statements is a ``match`` over the closed :data:`StoreOp` union
ending in ``assert_never``: an operation added to the engine and forgotten here is a type error,
never a write skipped silently inside a transaction that still commits.

Failure: any exception inside the transaction rolls it back and is raised as
:class:`CommitFailed`. The engine already applied the command in memory, so memory is now ahead
of the store; the caller (the engine loop) stops the daemon on it, and systemd restarts it from
the durable state, where the command is not processed yet and runs once when the relay replays
it (ARCHITECTURE §4).

Secrets written here (provider tokens, credentials) are registered with the log redaction filter
before they are written, so no later log line can show them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Sequence
from typing import assert_never

from bridge.engine.effects import (
    AddInbox,
    AddTombstone,
    AdvanceCursor,
    AppendTranscript,
    Commit,
    DeletePhone,
    DeleteProviderProfile,
    DeletePushSubscription,
    DeletePushSubscriptions,
    DeleteSession,
    DeleteTranscript,
    MarkInboxTaken,
    MarkProcessed,
    PruneProcessed,
    RecordDecision,
    RemoveInbox,
    SaveAgentCursor,
    SaveAnswer,
    SaveDeviceConfig,
    SavePhone,
    SaveProviderProfile,
    SavePushSubscription,
    SaveSession,
    SetCredential,
    StoreOp,
)
from bridge.logs import redact, register_secret
from bridge.records import record
from bridge.runtime.outbound import Outbound, SealedEvent
from store import accounts as accounts_store
from store import bridge_state as state
from store import decisions as decisions_store
from store import device_config as device_config_store
from store import host_answers
from store import push as push_store
from store.db import BridgeDatabase, Statement

__all__ = [
    "CommitFailed",
    "Committer",
    "PreparedCommit",
    "group_statements",
    "live_ops",
    "op_statements",
]


class CommitFailed(Exception):
    """A commit could not be made durable; the transaction was rolled back."""


def op_statements(op: StoreOp, now: int) -> list[Statement]:
    """The statements of one store operation (run inside the commit's transaction)."""
    match op:
        case MarkProcessed():
            return state.mark_processed_statements(op.event_id, op.created_at)
        case AdvanceCursor():
            return state.set_cursor_statements(op.last_seen, now)
        case SavePhone():
            phone = op.phone
            return state.save_phone_statements(
                phone.pubkey, phone.npub, phone.label, phone.paired_at
            )
        case DeletePhone():
            return state.delete_phone_statements(op.pubkey)
        case SaveSession():
            data = dataclasses.asdict(op.record)
            agent = data.pop("agent")
            return state.save_session_statements(op.record.session_id, data, agent=agent)
        case DeleteSession():
            return state.delete_session_statements(op.session_id)
        case AddTombstone():
            return state.add_tombstone_statements(op.session_id)
        case AppendTranscript():
            text = op.entry.model_dump_json(exclude_none=True)
            return state.append_transcript_statements(op.session_id, op.seq, text)
        case DeleteTranscript():
            return state.delete_transcript_statements(op.session_id)
        case AddInbox():
            return state.add_inbox_statements(op.uid, op.session_id, op.text, op.input_id, now)
        case PruneProcessed():
            return state.prune_processed_statements(op.before)
        case SaveProviderProfile():
            if token := op.record.get("authToken"):
                register_secret(str(token))
            return [accounts_store.save_provider_profile_statement(op.profile_id, op.record)]
        case DeleteProviderProfile():
            return [accounts_store.delete_provider_profile_statement(op.profile_id)]
        case SetCredential():
            if op.value:
                register_secret(op.value)
            return [accounts_store.set_credential_statement(op.name, op.value)]
        case SaveDeviceConfig():
            return [device_config_store.save_device_config_statement(op.phone, op.config)]
        case RecordDecision():
            return [
                decisions_store.record_decision_statement(
                    at=op.at,
                    session_id=op.session_id,
                    tool=op.tool,
                    outcome=op.outcome,
                    reasons=op.reasons,
                    detail=op.detail,
                    call=decisions_store.call_json(op.call, redact),
                )
            ]
        case SaveAgentCursor():
            return state.set_agent_cursor_statements(op.session_id, op.seq)
        case MarkInboxTaken():
            return state.mark_inbox_taken_statements(op.uid)
        case RemoveInbox():
            return state.remove_inbox_statements(op.uids)
        case SaveAnswer():
            answer = op.answer
            return [
                host_answers.save_answer_statement(
                    answer.session_id,
                    answer.request_id,
                    {
                        "allow": answer.allow,
                        "message": answer.message,
                        "always": answer.always,
                        "updated_input": answer.updated_input,
                    },
                    now,
                )
            ]
        case SavePushSubscription():
            register_secret(op.auth)
            return push_store.save_subscription_statements(
                op.phone, op.endpoint, op.p256dh, op.auth, now=now
            )
        case DeletePushSubscription():
            return [push_store.delete_subscription_statement(op.phone, op.endpoint)]
        case DeletePushSubscriptions():
            return [push_store.delete_phone_subscriptions_statement(op.phone)]
        case _:
            assert_never(op)


def live_ops(ops: Sequence[StoreOp]) -> list[bool]:
    """For each of `ops` (in transaction order): False when a later one overwrites all it writes.

    - ``SaveSession`` replaces the session's row; ``DeleteSession`` removes it. Either makes an
      earlier ``SaveSession`` or ``SaveAgentCursor`` of that session moot.
    - ``SaveAgentCursor`` sets the row's ``agent_seq``; a later one makes an earlier one moot.

    Nothing else in a transaction reads the sessions table (no foreign key, no trigger, no
    statement selecting from it), so dropping the moot ones leaves the same rows at the end.
    """
    replaced: set[str] = set()  # a later op replaces or deletes the row
    cursor_set: set[str] = set()  # a later op sets agent_seq
    live = [True] * len(ops)
    for index in range(len(ops) - 1, -1, -1):
        op = ops[index]
        if isinstance(op, SaveSession):
            session_id = op.record.session_id
            live[index] = session_id not in replaced
            replaced.add(session_id)
        elif isinstance(op, DeleteSession):
            replaced.add(op.session_id)
        elif isinstance(op, SaveAgentCursor):
            session_id = op.session_id
            live[index] = session_id not in replaced and session_id not in cursor_set
            cursor_set.add(session_id)
    return live


def group_statements(prepared: Sequence[PreparedCommit]) -> list[Statement]:
    """The one transaction of a group of commits: each commit's live operations, in order, then
    its outbox rows (see :func:`live_ops`)."""
    live = iter(live_ops([op for item in prepared for op in item.commit.ops]))
    statements: list[Statement] = []
    for item in prepared:
        for op in item.commit.ops:
            if next(live):
                statements.extend(op_statements(op, item.now))
        statements.extend(item.outbox)
    return statements


@record
class PreparedCommit:
    """A commit with its replies sealed and their outbox rows built: nothing written yet.

    The statements of its operations are built by :meth:`Committer.start`, for the whole group
    at once, so that writes a later commit of the group overwrites are left out.
    """

    commit: Commit
    sealed: tuple[SealedEvent, ...]
    """The durable replies, signed."""
    outbox: tuple[Statement, ...]
    """The outbox rows of :attr:`sealed`."""
    now: int
    """Unix seconds when it was prepared (the queued time of its inbox and outbox rows)."""


class Committer:
    """Applies the engine's commits, one or a group of them per transaction.

    Args:
        db: the bridge database.
        outbound: seals the durable replies and sends them once they are in the outbox.
        clock: unix seconds (the inbox row's and outbox row's queued time).
        on_cursor: told ``(session id, seq)`` once a session host's records up to `seq` are
            committed.
    """

    def __init__(
        self,
        db: BridgeDatabase,
        outbound: Outbound,
        clock: Callable[[], float],
        *,
        on_cursor: Callable[[str, int], None] | None = None,
    ) -> None:
        self._db = db
        self._outbound = outbound
        self._clock = clock
        self._on_cursor = on_cursor
        self.commits = 0
        self.transactions = 0

    async def commit(self, commit: Commit) -> None:
        """Make `commit` durable, then send its replies.

        Raises:
            CommitFailed: the transaction was rolled back (the cause is chained).
        """
        prepared = self.prepare(commit)
        await self.write([prepared])
        self.release(prepared)

    def prepare(self, commit: Commit) -> PreparedCommit:
        """Seal the durable replies and build their outbox rows; CPU only, nothing is written.

        Sealing needs no transaction; a failure here is a bug, and it leaves the store
        untouched. The engine loop prepares each commit of a group where the commit stands in
        its effects, so replies are sealed in effect order.
        """
        sealed = [s for p in commit.outbox for s in self._outbound.seal(p, durable=True)]
        now = int(self._clock())
        outbox = self._outbound.outbox_statements(sealed, now)
        return PreparedCommit(commit, tuple(sealed), tuple(outbox), now)

    async def write(self, prepared: Sequence[PreparedCommit]) -> None:
        """Make every prepared commit durable, in order, in ONE transaction (one trip).

        Either all of them are durable afterwards, or none: the group is one transaction. What
        they send is sent by :meth:`release`, by the caller, once this returned.

        Raises:
            CommitFailed: the transaction was rolled back (the cause is chained).
        """
        await self.finish(prepared, self.start(prepared))

    def start(self, prepared: Sequence[PreparedCommit]) -> Awaitable[None]:
        """:meth:`write`, handed to the store's thread now; pass the result to :meth:`finish`.

        For the engine loop, which seals the group's publishes while the transaction runs.
        """
        return self._db.start_write(group_statements(prepared))

    async def finish(self, prepared: Sequence[PreparedCommit], writing: Awaitable[None]) -> None:
        """Wait for a :meth:`start` ed write.

        Raises:
            CommitFailed: the transaction was rolled back (the cause is chained).
        """
        try:
            await writing
        except Exception as exc:
            kinds = {type(op).__name__ for item in prepared for op in item.commit.ops}
            names = ", ".join(sorted(kinds)) or "no operations"
            count = f"{len(prepared)} commits" if len(prepared) > 1 else "a commit"
            raise CommitFailed(f"{count} of {names} failed: {type(exc).__name__}: {exc}") from exc
        self.commits += len(prepared)
        self.transactions += 1

    def release(self, prepared: PreparedCommit) -> None:
        """A written commit: send its replies, tell the runners which records are durable."""
        self._outbound.send(list(prepared.sealed))
        if self._on_cursor is not None:
            # Only now may a session host forget these records (it trims its journal).
            for op in prepared.commit.ops:
                if isinstance(op, SaveAgentCursor):
                    self._on_cursor(op.session_id, op.seq)
