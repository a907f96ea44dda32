"""The commit: the one place where the engine's store operations become store calls.

Rule 1 of :mod:`bridge.engine.effects`: a ``Commit`` is ONE SQLite transaction, and nothing after
it runs before it is durable. :meth:`Committer.commit` applies every operation of the commit in
order, writes the commit's durable replies to the outbox in the same transaction, and only then
hands those replies to the sender. So a command's ``MarkProcessed``, its state change, its inbox
row and its ``input-ack`` are all durable together, or none of them is.

The mapping from operation to store function is a ``match`` over the closed :data:`StoreOp` union
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
from collections.abc import Callable
from typing import assert_never

from bridge.engine.effects import (
    AddInbox,
    AddTombstone,
    AdvanceCursor,
    AppendTranscript,
    Commit,
    DeletePhone,
    DeleteProviderProfile,
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
    SaveSession,
    SetCredential,
    StoreOp,
)
from bridge.logs import register_secret
from bridge.runtime.outbound import Outbound
from store import accounts as accounts_store
from store import bridge_state, host_answers
from store import decisions as decisions_store
from store import device_config as device_config_store
from store.db import BridgeDatabase

__all__ = ["CommitFailed", "Committer", "apply_op"]


class CommitFailed(Exception):
    """A commit could not be made durable; the transaction was rolled back."""


async def apply_op(db: BridgeDatabase, op: StoreOp, now: int) -> None:
    """Perform one store operation (the caller holds the transaction)."""
    match op:
        case MarkProcessed():
            await bridge_state.mark_processed(db, op.event_id, op.created_at)
        case AdvanceCursor():
            await bridge_state.set_cursor(db, op.last_seen)
        case SavePhone():
            phone = op.phone
            await bridge_state.save_phone(
                db, phone.pubkey, phone.npub, phone.label, phone.paired_at
            )
        case DeletePhone():
            await bridge_state.delete_phone(db, op.pubkey)
        case SaveSession():
            record = op.record
            await bridge_state.save_session(db, record.session_id, dataclasses.asdict(record))
        case DeleteSession():
            await bridge_state.delete_session(db, op.session_id)
        case AddTombstone():
            await bridge_state.add_tombstone(db, op.session_id)
        case AppendTranscript():
            text = op.entry.model_dump_json(exclude_none=True)
            await bridge_state.append_transcript(db, op.session_id, op.seq, text)
        case DeleteTranscript():
            await bridge_state.delete_transcript(db, op.session_id)
        case AddInbox():
            await bridge_state.add_inbox(db, op.uid, op.session_id, op.text, op.input_id, now)
        case PruneProcessed():
            await bridge_state.prune_processed(db, op.before)
        case SaveProviderProfile():
            if token := op.record.get("authToken"):
                register_secret(str(token))
            await accounts_store.save_provider_profile(db, op.profile_id, op.record)
        case DeleteProviderProfile():
            await accounts_store.delete_provider_profile(db, op.profile_id)
        case SetCredential():
            if op.value:
                register_secret(op.value)
            await accounts_store.set_credential(db, op.name, op.value)
        case SaveDeviceConfig():
            await device_config_store.save_device_config(db, op.phone, op.config)
        case RecordDecision():
            await decisions_store.record_decision(
                db,
                at=op.at,
                session_id=op.session_id,
                tool=op.tool,
                outcome=op.outcome,
                reasons=op.reasons,
                detail=op.detail,
            )
        case SaveAgentCursor():
            await bridge_state.set_agent_cursor(db, op.session_id, op.seq)
        case MarkInboxTaken():
            await bridge_state.mark_inbox_taken(db, op.uid)
        case RemoveInbox():
            await bridge_state.remove_inbox(db, op.uids)
        case SaveAnswer():
            answer = op.answer
            await host_answers.save_answer(
                db,
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
        case _:
            assert_never(op)


class Committer:
    """Applies the engine's commits.

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

    async def commit(self, commit: Commit) -> None:
        """Make `commit` durable, then send its replies.

        Raises:
            CommitFailed: the transaction was rolled back (the cause is chained).
        """
        # Sealing is CPU only and needs no transaction; a failure here is a bug, and it too
        # leaves the store untouched.
        sealed = [s for p in commit.outbox for s in self._outbound.seal(p, durable=True)]
        now = int(self._clock())
        try:
            async with self._db.transaction():
                for op in commit.ops:
                    await apply_op(self._db, op, now)
                await self._outbound.queue_durable(sealed)
        except Exception as exc:
            kinds = ", ".join(sorted({type(op).__name__ for op in commit.ops})) or "no operations"
            raise CommitFailed(f"a commit of {kinds} failed: {type(exc).__name__}: {exc}") from exc
        self.commits += 1
        self._outbound.send(sealed)
        if self._on_cursor is not None:
            # Only now may a session host forget these records (it trims its journal).
            for op in commit.ops:
                if isinstance(op, SaveAgentCursor):
                    self._on_cursor(op.session_id, op.seq)
