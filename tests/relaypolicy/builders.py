"""Builders for strfry plugin requests (strfry-policies' ``buildInputMessage`` style).

Pure tests do not need real signatures: strfry checks those before the plugin is asked, so the rules
never look at ``sig``. The integration tests sign real events.
"""

from __future__ import annotations

import itertools
from typing import Any

from relaypolicy.message import PolicyInput, parse_request

__all__ = [
    "BRIDGE",
    "NOW",
    "PHONE",
    "STRANGER",
    "key",
    "make_input",
    "make_request",
]

NOW = 1_700_000_000


def key(n: int) -> str:
    """A distinct 64-hex string (a pubkey or an id; never a real key)."""
    return f"{n:064x}"


BRIDGE = key(0xB1D6E)
PHONE = key(0x9407E)
STRANGER = key(0x5747)

_ids = itertools.count(1)


def make_request(
    *,
    kind: int = 4515,
    pubkey: str = PHONE,
    tags: list[list[str]] | None = None,
    received_at: int = NOW,
    source_type: str = "IP4",
    source_info: str = "203.0.113.7",
    event_id: str | None = None,
    created_at: int | None = None,
    content: str = "",
    **extra: Any,
) -> dict[str, Any]:
    """A strfry plugin request as a dict; tags default to what the kind needs to pass."""
    if tags is None:
        tags = [["p", BRIDGE]]
        if kind in (4515, 4516):
            tags.append(["expiration", str(received_at + 3600)])
        if kind in (30443, 30515):
            tags.append(["d", "x"])
    request: dict[str, Any] = {
        "type": "new",
        "event": {
            "id": event_id or key(0xE0000000 + next(_ids)),
            "pubkey": pubkey,
            "created_at": received_at if created_at is None else created_at,
            "kind": kind,
            "tags": tags,
            "content": content,
            "sig": "0" * 128,
        },
        "receivedAt": received_at,
        "sourceType": source_type,
        "sourceInfo": source_info,
    }
    request.update(extra)
    return request


def make_input(**overrides: Any) -> PolicyInput:
    """:func:`make_request`, parsed."""
    return parse_request(make_request(**overrides))
