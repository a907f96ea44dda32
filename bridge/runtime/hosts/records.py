"""A session host's records as the engine takes them, and what is read from a dead host's file.

Three small jobs of the daemon's side of a host (:mod:`bridge.runtime.hosts.host_runner`), apart so
that each is readable and testable on its own:

- :func:`host_event_input` — one journal record → one engine input (an entry is validated here,
  at the edge, against the wire's ``OutputEntry``; an invalid one is dropped with a log line and
  its seq still counted);
- :func:`read_dead_journal` — the records a host journaled and never sent before it died, read
  from its file once its lock is free;
- :func:`restart_entry` — the ``session_restart`` line the phone gets when the agent is resumed
  in a new host: why, which restart of how many, and which of its inputs was cut short (the new
  host journals that as its first record, so that whichever daemon follows it says it once).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final, assert_never

from pydantic import ValidationError

from bridge.engine.inputs import (
    AgentAnswered,
    AgentEntry,
    AgentFailed,
    AgentOptionSet,
    AgentReady,
    AgentRecordEvent,
    AgentRestarted,
    AgentStateChanged,
    AgentTookInput,
    PermissionRequested,
)
from bridge.host.events import (
    Answered,
    Entry,
    Exited,
    Failed,
    HostEvent,
    InputTaken,
    InterruptedInput,
    OptionSet,
    PermissionAsked,
    Ready,
    Restarted,
    StateChanged,
    decode_event,
)
from bridge.host.journal import Journal, JournalError, JournalLocked
from bridge.host.vocabulary import iso_timestamp
from bridge.protocol import OutputEntry
from store.bridge_state import InboxRow

__all__ = [
    "QUOTE_CHARS",
    "host_event_input",
    "interrupt_candidates",
    "permission_input",
    "read_dead_journal",
    "restart_entry",
]

logger = logging.getLogger(__name__)

QUOTE_CHARS: Final = 60
"""How much of an interrupted input the restart line quotes."""
_LOCK_RETRIES: Final = 50
_LOCK_RETRY_WAIT: Final = 0.1


def host_event_input(session_id: str, event: HostEvent) -> AgentRecordEvent | None:
    """The engine input of one journal record (None: a record the engine only counts)."""
    match event:
        case Ready():
            return AgentReady(
                session_id, event.sdk_session_id, event.model, event.cwd, event.sandboxed
            )
        case Failed():
            return AgentFailed(session_id, event.reason)
        case Entry():
            try:
                entry = OutputEntry.model_validate(dict(event.entry))
            except ValidationError as exc:
                logger.warning(
                    "! session %s: the agent wrote an entry that is not valid (%d error(s)); "
                    "dropped",
                    session_id[:8],
                    exc.error_count(),
                )
                return None
            return AgentEntry(session_id, entry)
        case StateChanged():
            return AgentStateChanged(session_id, event.state)
        case OptionSet():
            return AgentOptionSet(session_id, event.option, event.value, event.result)
        case PermissionAsked():
            return permission_input(session_id, event)
        case InputTaken():
            return AgentTookInput(session_id, event.uid)
        case Answered():
            return AgentAnswered(session_id, event.uids)
        case Exited():
            return None
        case Restarted():
            entry = restart_entry(
                event.reason, event.count, event.budget, event.interrupted, event.at
            )
            return AgentRestarted(session_id, entry, tuple(i.uid for i in event.interrupted))
        case _:
            assert_never(event)


def permission_input(session_id: str, event: PermissionAsked) -> PermissionRequested:
    """A parked ask as the engine's ``PermissionRequested``."""
    return PermissionRequested(
        session_id,
        event.request_id,
        event.tool_name,
        dict(event.tool_input),
        description=event.description,
        agent_id=event.agent_id,
    )


async def read_dead_journal(
    path: Path, after: int, label: str
) -> list[tuple[int, HostEvent | None]]:
    """The records after `after` of a host that is gone, oldest first.

    Waits (up to 5 s) for the lock of a host on its way out. A record that cannot be decoded
    comes as ``(seq, None)`` (logged): counted, never applied. Records trimmed before the engine
    had them cannot be read back: that is logged loudly (it would take a store that lost a
    commit) and the reading goes on from what is there.
    """
    if not path.exists():
        return []
    for _ in range(_LOCK_RETRIES):
        try:
            journal = Journal.open(path)
            break
        except JournalLocked:
            await asyncio.sleep(_LOCK_RETRY_WAIT)  # the host is on its way out
        except JournalError as exc:
            logger.error("x session %s: its journal cannot be read: %s", label, exc)
            return []
    else:
        logger.error("x session %s: its host holds the journal and does not answer", label)
        return []
    out: list[tuple[int, HostEvent | None]] = []
    try:
        floor = journal.first_seq - 1
        if after < floor:
            logger.error(
                "x session %s: journal records %d..%d were trimmed before the engine had them",
                label,
                after + 1,
                floor,
            )
            out.append((floor, None))
        for seq, payload in journal.read(after=after):
            try:
                out.append((seq, decode_event(payload)))
            except ValueError as exc:
                logger.error("x session %s: journal record %d: %s", label, seq, exc)
                out.append((seq, None))
    except JournalError as exc:
        logger.error("x session %s: its journal cannot be read: %s", label, exc)
    finally:
        journal.close()
    return out


def restart_entry(
    reason: str, count: int, budget: int, interrupted: Sequence[InterruptedInput], at: float
) -> OutputEntry:
    """The ``session_restart`` line (PROTOCOL.md §14)."""
    text = f"{reason} — restarting ({count} of {budget})"
    if interrupted:
        quote = interrupted[0].text.strip().replace("\n", " ")
        if len(quote) > QUOTE_CHARS:
            quote = quote[: QUOTE_CHARS - 1] + "…"
        more = f" and {len(interrupted) - 1} more" if len(interrupted) > 1 else ""
        text += f"; your input “{quote}”{more} was interrupted and did not finish"
    metadata: dict[str, Any] = {"special": "session_restart", "reason": reason}
    if interrupted:
        metadata["interrupted"] = [item.label for item in interrupted]
    return OutputEntry(
        entryType="system", content=text, timestamp=iso_timestamp(at), metadata=metadata
    )


def interrupt_candidates(rows: Sequence[InboxRow]) -> tuple[InterruptedInput, ...]:
    """The inbox rows handed to an agent that died (``sent`` or ``taken``), as a restart
    order's candidates."""
    return tuple(
        InterruptedInput(row.uid, row.input_id or row.uid, row.text[: QUOTE_CHARS * 2])
        for row in rows
    )
