"""The bridge logic, sans-I/O: inputs in, effects out, time passed in.

The core sits here: ``core`` (the :class:`~bridge.engine.core.Engine`: every input routed over a
closed union, the effects returned in order), ``inputs`` and ``effects`` (the two vocabularies),
``admission`` and ``ingest`` (who may speak, what was seen, what is fresh — and where the
exactly-once marks join the command's transaction), ``state`` (what the engine knows of each
session), ``transcript`` (the one place a line gets its seq), ``sync`` (gap repair), ``publish``
(one message → the events to seal), ``heartbeat``, ``host``, ``agents``, ``timefmt``.

The areas: :mod:`~bridge.engine.sessions` (sessions and their cards), :mod:`~bridge.engine.phones`
(phones, pairing and what they keep on the bridge), :mod:`~bridge.engine.editor` (the editor's
tasks). The permission gate the engine consults is its own package, :mod:`bridge.gate`.
"""

__all__: list[str] = []
