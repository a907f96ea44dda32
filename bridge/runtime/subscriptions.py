"""The daemon's standing subscriptions, rebuilt from the engine whenever it says so.

Two subscriptions on every relay: ``commands`` (kind 4515 from the paired phones to the bridge,
while any phone is paired) and ``pairing`` (kind 4515 from anyone to the bridge, while a pairing
window is open). The pool asks the filter functions again at every reconnect, so a ``since``
computed from the engine's cursor is always current.
"""

from __future__ import annotations

from collections.abc import Callable

from bridge.engine.core import Engine
from bridge.nostr.pool import RelayPool

__all__ = ["COMMANDS_SUB", "PAIRING_SUB", "Subscriptions"]

COMMANDS_SUB = "commands"
PAIRING_SUB = "pairing"


class Subscriptions:
    """Keeps the pool's subscriptions in step with the engine (the ``Resubscribe`` effect)."""

    def __init__(self, pool: RelayPool, engine: Engine, wall: Callable[[], float]) -> None:
        self._pool = pool
        self._engine = engine
        self._wall = wall

    async def refresh(self) -> None:
        engine, wall = self._engine, self._wall
        if engine.command_filters(wall()):
            await self._pool.subscribe(COMMANDS_SUB, lambda: engine.command_filters(wall()))
        else:
            await self._pool.unsubscribe(COMMANDS_SUB)
        if engine.pairing_filters(wall()):
            await self._pool.subscribe(PAIRING_SUB, lambda: engine.pairing_filters(wall()))
        else:
            await self._pool.unsubscribe(PAIRING_SUB)
