"""The session host: a small process per agent session that outlives the daemon.

Were an agent session to live inside the daemon, a ``kill -9`` of the daemon while Claude Code
waited on a permission or hook answer would turn into a refusal nobody gave. So each session runs
in a host (``python -m bridge.host``, started by the daemon, nobody's child) that owns the agent,
journals every event the agent produces, parks every callback until a daemon answers it, and is
adopted again by the next daemon.

==============  ==================================================================================
``journal``     the durable, seq-numbered record of the agent's events (never renumbered)
``events``      what a journal record says (ready, entry, state, option, permission, answered, …)
``driver``      the seam to the agent: :class:`~bridge.host.driver.Driver` and the host's services
``wire``        the socket protocol between the daemon and a host (JSON lines)
``launch``      the one line the daemon writes on a new host's stdin (the agent's environment)
``layout``      where a host keeps its files; telling a live host from a reused pid
``server``      the host itself: the journal, parked callbacks, the agent's end
``connection``  one daemon's connection: handshake, replay and live records, re-presented asks
``vocabulary``  the wire's few words a host needs, without the wire's (heavy) models
==============  ==================================================================================

The package imports nothing of the daemon's stack (runtime, engine, store, relays, pydantic): a
host must stay lean (a test checks the boundary, another the modules a host process loads). The
drivers live with their agents (:mod:`bridge.agents.claude`, :mod:`bridge.agents.scripted`) and
keep the same rule.
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
