"""The session host: a small process per agent session that outlives the daemon.

Today an agent session lives inside the daemon, so a ``kill -9`` of the daemon while Claude Code
waits on a permission or hook answer turns into a refusal nobody gave. The session host owns the
agent instead, journals every event it produces, parks every callback until the daemon answers
it, and is adopted again by the next daemon (see the issue "Sessions that outlive the bridge").

Landed so far: :mod:`.journal`, the durable, seq-numbered record of a session's events. The host
process, its socket and the daemon's adoption build on it. The package imports nothing of the
daemon's stack (runtime, engine, store, relays): a host must stay lean.
"""

from bridge.host.journal import (
    MAX_RECORD_BYTES,
    Journal,
    JournalCorrupt,
    JournalError,
    JournalLocked,
    Recovery,
)

__all__ = [
    "MAX_RECORD_BYTES",
    "Journal",
    "JournalCorrupt",
    "JournalError",
    "JournalLocked",
    "Recovery",
]
