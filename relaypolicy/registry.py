"""The registry interface the rules ask, and an in-memory implementation.

The rules need two answers: *is this pubkey a registered writer?* and *does this registered bridge
have a pairing window open, and until when?* Keeping that an interface lets one decision function
serve both deployments:

* the strfry plugin passes :class:`relaypolicy.sqlite_registry.SqliteRegistry` (the registry
  database shared with the admin API, refreshed when another process changes it);
* the bridge daemon's embedded relay passes a :class:`MemoryRegistry` holding the bridge and its
  paired phones, updated by the daemon when a phone pairs or is removed.

Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Protocol, runtime_checkable

__all__ = ["MemoryRegistry", "NotRegisteredError", "PubkeyRegistry"]


@runtime_checkable
class PubkeyRegistry(Protocol):
    """What the rules read. Pubkeys are 64 lowercase hex characters."""

    def is_registered(self, pubkey: str) -> bool:
        """True when ``pubkey`` may write the registered-only kinds."""
        ...

    def pairing_window_until(self, pubkey: str) -> int | None:
        """The end (unix seconds, exclusive) of ``pubkey``'s pairing window, or None.

        Only registered pubkeys have windows. A window whose end has passed may still be reported;
        the rules compare it with the event's ``receivedAt``.
        """
        ...


class NotRegisteredError(KeyError):
    """A pairing window was asked for a pubkey that is not registered."""

    def __str__(self) -> str:
        return "pubkey is not registered"


class MemoryRegistry:
    """A registry held in memory (the daemon's embedded relay; tests).

    Args:
        pubkeys: the registered pubkeys (64 lowercase hex).
        windows: open pairing windows, pubkey -> end (unix seconds); each must be registered.
    """

    __slots__ = ("_pubkeys", "_windows")

    def __init__(
        self, pubkeys: Iterable[str] = (), windows: Mapping[str, int] | None = None
    ) -> None:
        self._pubkeys: set[str] = set(pubkeys)
        self._windows: dict[str, int] = {}
        for pubkey, until in (windows or {}).items():
            self.open_pairing_window(pubkey, until)

    def __len__(self) -> int:
        return len(self._pubkeys)

    def __contains__(self, pubkey: object) -> bool:
        return pubkey in self._pubkeys

    def __repr__(self) -> str:
        return f"MemoryRegistry({len(self._pubkeys)} pubkeys, {len(self._windows)} windows)"

    def is_registered(self, pubkey: str) -> bool:
        """See :meth:`PubkeyRegistry.is_registered`."""
        return pubkey in self._pubkeys

    def pairing_window_until(self, pubkey: str) -> int | None:
        """See :meth:`PubkeyRegistry.pairing_window_until`."""
        return self._windows.get(pubkey)

    def register(self, pubkey: str) -> bool:
        """Add ``pubkey``; True when it was not registered before."""
        if pubkey in self._pubkeys:
            return False
        self._pubkeys.add(pubkey)
        return True

    def unregister(self, pubkey: str) -> bool:
        """Remove ``pubkey`` and any pairing window of it; True when it was registered."""
        self._windows.pop(pubkey, None)
        if pubkey not in self._pubkeys:
            return False
        self._pubkeys.discard(pubkey)
        return True

    def open_pairing_window(self, pubkey: str, until: int) -> None:
        """Open (or move the end of) ``pubkey``'s pairing window.

        Raises:
            NotRegisteredError: ``pubkey`` is not registered.
        """
        if pubkey not in self._pubkeys:
            raise NotRegisteredError(pubkey)
        self._windows[pubkey] = until

    def close_pairing_window(self, pubkey: str) -> bool:
        """Close ``pubkey``'s pairing window; True when one was open."""
        return self._windows.pop(pubkey, None) is not None

    def replace(self, pubkeys: Iterable[str], windows: Mapping[str, int]) -> None:
        """Swap in a whole new snapshot (used when the registry database changed)."""
        registered = set(pubkeys)
        self._windows = {pk: until for pk, until in windows.items() if pk in registered}
        self._pubkeys = registered
