"""Admission of a command event: who sent it, is it new, is it fresh, what does it say — and the
one place where the exactly-once marks join the command's transaction.

Every kind-4515 event passes here before any handler sees a command (ARCHITECTURE §4, steps
2–5; the checks themselves are :class:`~bridge.engine.ingest.IngestGate`):

1. the author must be a paired phone, or anyone while a pairing window is open — but a stranger
   may only send ``pair-request`` (checked before dedup, so strangers cannot evict real ids);
2. dedup, decrypt, reassembly and decode (the gate);
3. for a paired phone: the cursor advances, the phone's capabilities and the time of the last
   command are noted;
4. a stale command (older than 300 s) is never executed: it is recorded as processed, and an
   ``input`` with an ``inputId`` is answered ``input-failed{reason:"expired"}``.

**The marks fold.** Handlers return only their own effects. :func:`fold_marks` then puts the
``MarkProcessed`` of the event (and of its group's other fragments) and the ``AdvanceCursor``
at the front of the command's first ``Commit``, or in a ``Commit`` of their own in front of
everything when the handler's first effect is not a commit. So whatever a handler returns, the
"processed" record commits in the same transaction as the command's state change and before
anything the command causes — the rule that makes a command run at most once and an
acknowledged one never lost. No handler writes a mark by hand.

Fragments of groups the assembler gave up on (expired, evicted) are recorded after every
command event and every tick (:meth:`Admission.given_up`), so a flood of incomplete groups does
not come back from the relays after a restart.

Pure: the clock is ``now``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from bridge.engine.effects import (
    AdvanceCursor,
    Commit,
    Dropped,
    Effect,
    MarkProcessed,
    Publish,
    StoreOp,
)
from bridge.engine.ingest import Decoded, IngestGate
from bridge.engine.inputs import CommandEventReceived
from bridge.engine.phones.paired import PhoneBook
from bridge.engine.phones.pairing import Pairing
from bridge.protocol import InputCommand, InputFailedMessage, PairRequestCommand
from bridge.records import record

__all__ = ["Admission", "Admitted", "fold_marks"]


@record
class Admitted:
    """A command that may run: who sent it, what it says, and the marks of its transaction."""

    decoded: Decoded
    marks: tuple[StoreOp, ...]
    paired: bool
    """False for a stranger's ``pair-request`` through an open window."""


def fold_marks(marks: Sequence[StoreOp], effects: list[Effect]) -> list[Effect]:
    """Put `marks` first in the command's first commit (see the module docstring)."""
    if not marks:
        return effects
    if effects and isinstance(effects[0], Commit):
        first = effects[0]
        return [Commit((*marks, *first.ops), first.outbox), *effects[1:]]
    return [Commit(tuple(marks)), *effects]


class Admission:
    """Admits command events; see the module docstring."""

    def __init__(self, ingest: IngestGate, phones: PhoneBook, pairing: Pairing) -> None:
        self.ingest = ingest
        self._phones = phones
        self._pairing = pairing
        self.last_command_at: float | None = None
        """When the last command of a paired phone was admitted (for ``status``)."""

    def admit(self, received: CommandEventReceived, now: float) -> Admitted | list[Effect]:
        """An :class:`Admitted` command, or the effects of refusing the event."""
        event = received.event
        paired = event.pubkey in self._phones
        if not paired and self._pairing.window_for(now) is None:
            return [Dropped("author is not a paired phone", event.id, event.pubkey)]
        verdict = self.ingest.admit(event, now, paired=paired)
        if not isinstance(verdict, Decoded):
            effects: list[Effect] = []
            if verdict.mark:
                ids = ((event.id, event.created_at), *verdict.fragments)
                effects.append(Commit(tuple(self._record(ids))))
            effects.append(Dropped(verdict.reason, event.id, event.pubkey))
            return effects
        marks = self._record(((event.id, event.created_at), *verdict.fragments))
        if not paired:
            if not isinstance(verdict.command, PairRequestCommand):
                return [
                    Commit(tuple(marks)),
                    Dropped("stranger sent a non-pairing command", event.id),
                ]
            return Admitted(verdict, tuple(marks), paired=False)
        cursor = self.ingest.advance(event.created_at, now)
        if cursor is not None:
            marks.append(AdvanceCursor(cursor))
        self._phones.heard(event.pubkey, verdict.command.caps)
        self.last_command_at = now
        return Admitted(verdict, tuple(marks), paired=True)

    def stale(self, admitted: Admitted, audience: tuple[str, ...]) -> list[Effect]:
        """A stale command is recorded, never run; an ``input`` with an id learns it expired."""
        decoded = admitted.decoded
        command = decoded.command
        reason = f"stale {command.type} (created {decoded.created_at}), not executed"
        if isinstance(command, InputCommand) and command.inputId:
            failed = InputFailedMessage(
                sessionId=command.sessionId, reason="expired", inputId=command.inputId
            )
            return [
                Commit((), outbox=(Publish(failed, audience),)),
                Dropped(reason, decoded.event_id),
            ]
        return [Dropped(reason, decoded.event_id)]

    def given_up(self) -> list[Effect]:
        """Record the fragments of groups that can no longer complete (see the docstring)."""
        ids = self.ingest.take_given_up()
        return [Commit(tuple(self._record(ids)))] if ids else []

    def _record(self, ids: Iterable[tuple[str, int]]) -> list[StoreOp]:
        marks: list[StoreOp] = []
        for event_id, created_at in ids:
            self.ingest.remember(event_id, created_at)
            marks.append(MarkProcessed(event_id, created_at))
        return marks
