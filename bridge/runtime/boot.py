"""Reading the durable state the engine is built from, at every start.

The store returns plain rows; this turns them into the engine's records, and says what it could
not use: a session record that no longer fits :class:`~bridge.engine.effects.SessionRecord`, or a
provider profile that :func:`~bridge.engine.phones.providers.profile_from_record` rejects, is skipped
with a warning naming it (and what happens to it), never dropped silently. The rows stay in the
database untouched.

Every secret loaded (stored API keys, provider tokens) is registered with the log redaction filter
before anything else can log it.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from typing import Any

from bridge.engine.core import EngineState
from bridge.engine.effects import PairedPhone, SessionRecord, TaskPolicy
from bridge.engine.phones.credentials import Credentials
from bridge.engine.phones.providers import ProviderProfile, profile_from_record
from bridge.logs import register_secret
from store import accounts as accounts_store
from store import bridge_state
from store.db import BridgeDatabase

__all__ = ["load_engine_state", "session_record"]

logger = logging.getLogger(__name__)

_RECORD_FIELDS = frozenset(f.name for f in dataclasses.fields(SessionRecord))


def session_record(data: Mapping[str, Any]) -> SessionRecord | str:
    """A stored session record as the engine's, or why it cannot be one.

    Unknown fields (written by a newer version) are ignored; a missing required field or a
    field of the wrong shape makes the record unusable.
    """
    fields = {k: v for k, v in data.items() if k in _RECORD_FIELDS}
    if fields.get("task") is not None:
        task = TaskPolicy.from_json(fields["task"])
        if task is None:
            return "its task policy is unreadable"
        fields["task"] = task
    try:
        record = SessionRecord(**fields)
    except TypeError as exc:
        return f"it does not fit a session record ({exc})"
    if not isinstance(record.session_id, str) or not isinstance(record.cwd, str):
        return "its id or cwd is not text"
    if not isinstance(record.agent, str) or not record.agent:
        return "its agent is not a name"
    if not isinstance(record.seq_high, int) or isinstance(record.seq_high, bool):
        return "its seq_high is not a number"
    if (
        not isinstance(record.agent_seq, int)
        or isinstance(record.agent_seq, bool)
        or record.agent_seq < 0
    ):
        return "its agent_seq is not a non-negative number"
    return record


async def load_engine_state(db: BridgeDatabase) -> EngineState:
    """Everything the engine needs from the store (see the module docstring)."""
    loaded = await bridge_state.load_state(db)
    sessions: list[SessionRecord] = []
    for data in loaded.sessions:
        record = session_record(data)
        if isinstance(record, str):
            logger.warning(
                "! session %s skipped at load: %s (it stays in the database, but is not "
                "resumed or listed)",
                str(data.get("session_id", "?"))[:8],
                record,
            )
            continue
        sessions.append(record)
    profiles: list[ProviderProfile] = []
    for profile_id, stored in await accounts_store.load_provider_profiles(db):
        if token := stored.get("authToken"):
            register_secret(str(token))
        profile = profile_from_record(profile_id, stored)
        if profile is None:
            logger.warning(
                "! provider profile %r skipped at load: it lacks a label, a base URL or a model "
                "(sessions bound to it fail with a readable reason; re-create it on the phone)",
                profile_id[:40],
            )
            continue
        profiles.append(profile)
    credentials = Credentials.from_store(await accounts_store.load_credentials(db))
    for secret in (credentials.anthropic_api_key, credentials.github_pat):
        if secret:
            register_secret(secret)
    return EngineState(
        phones=[PairedPhone(*row) for row in loaded.phones],
        last_seen=loaded.last_seen,
        processed=loaded.processed,
        sessions=sessions,
        tombstones=loaded.tombstones,
        providers=profiles,
        credentials=credentials,
    )
