"""The project's own Nostr relay, which the daemon embeds when no relay is configured.

Pure modules, re-exported here: ``classes`` (NIP-01 storage classes), ``nip11`` (the information
document and the limits it announces) and ``session`` (one client's frames and subscriptions,
sans-I/O). The I/O modules ``storage`` (SQLite) and ``server`` (websockets) are imported by
their module path, so that importing this package stays free of I/O; so is ``site`` (the static
files a server may answer plain HTTP GETs with, and their headers), which only a server uses.

Why a relay of our own: the embedded relay must be as good as the daemon behind it, and the
first candidate (rust-nostr's LocalRelay) was not — ARCHITECTURE §7 and README "Choosing
relays" give the comparison.
"""

from bridge.relay.classes import StorageClass, address_of, d_tag_of, is_newer, storage_class
from bridge.relay.nip11 import INFO_CONTENT_TYPE, RelayLimits, info_document
from bridge.relay.session import (
    ClientSession,
    Publish,
    Reply,
    Request,
    Subscribe,
    Unsubscribe,
    closed_frame,
    eose_frame,
    event_frame,
    notice_frame,
    ok_frame,
)

__all__ = [
    "INFO_CONTENT_TYPE",
    "ClientSession",
    "Publish",
    "RelayLimits",
    "Reply",
    "Request",
    "StorageClass",
    "Subscribe",
    "Unsubscribe",
    "address_of",
    "closed_frame",
    "d_tag_of",
    "eose_frame",
    "event_frame",
    "info_document",
    "is_newer",
    "notice_frame",
    "ok_frame",
    "storage_class",
]
