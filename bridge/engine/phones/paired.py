"""The paired phones: who may command the bridge, who hears it, what each phone can show.

Identity is the event author's pubkey, never a payload claim. Every message the bridge sends to
"every phone" goes to :meth:`PhoneBook.audience` (sorted, so effect lists are deterministic).
Capabilities (``caps``) are remembered per phone from its latest valid command this boot; the
``diff`` gate opens only when every phone heard from lists ``diff``.

Pure: records in, records out; the store mirrors them through ``SavePhone`` / ``DeletePhone``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from bridge.engine.effects import PairedPhone
from bridge.protocol import diff_allowed

__all__ = ["PhoneBook"]


class PhoneBook:
    """Paired phones (by pubkey) and the capabilities each one sent last."""

    def __init__(self, phones: Iterable[PairedPhone] = ()) -> None:
        self._phones: dict[str, PairedPhone] = {p.pubkey: p for p in phones}
        self._caps: dict[str, tuple[str, ...]] = {}

    def __len__(self) -> int:
        return len(self._phones)

    def __contains__(self, pubkey: object) -> bool:
        return pubkey in self._phones

    def get(self, pubkey: str) -> PairedPhone | None:
        return self._phones.get(pubkey)

    def all(self) -> list[PairedPhone]:
        """The paired phones, oldest pairing first."""
        return sorted(self._phones.values(), key=lambda p: (p.paired_at, p.pubkey))

    def audience(self) -> tuple[str, ...]:
        """Every paired phone's pubkey, sorted: the audience of a message to all."""
        return tuple(sorted(self._phones))

    def caps(self) -> dict[str, tuple[str, ...]]:
        """The capabilities of every phone heard from this boot (a copy)."""
        return dict(self._caps)

    def diff_allowed(self) -> bool:
        """Whether the ``diff`` entries may be produced (every phone heard from can show them)."""
        return diff_allowed(self._caps)

    def put(self, phone: PairedPhone) -> None:
        self._phones[phone.pubkey] = phone

    def remove(self, pubkey: str) -> PairedPhone | None:
        """Forget a phone and its capabilities; the removed record, or None."""
        self._caps.pop(pubkey, None)
        return self._phones.pop(pubkey, None)

    def heard(self, pubkey: str, caps: Sequence[str] | None) -> None:
        """A valid command of a paired phone arrived with these capabilities."""
        self._caps[pubkey] = tuple(caps or ())
