"""The event kinds a private CodeDeck relay knows, and what each one needs to be written.

The four bridge-protocol kinds come from :mod:`bridge.protocol.kinds` (one source of truth for the
wire contract). The DM and Marmot kinds are not part of the bridge protocol, but the v10 contract
("DM kinds (not bridge protocol, but relay-policy relevant)") says how a CodeDeck relay treats them,
so they are named here.
"""

from __future__ import annotations

from typing import Final

from bridge.protocol.kinds import COMMAND_KIND, LIVE_KIND, RESPONSE_KIND, SESSION_LIST_KIND

__all__ = [
    "ACCEPTED_KINDS",
    "ADDRESSABLE_NEEDS_D_TAG",
    "CODEDECK_KINDS",
    "COMMAND_KIND",
    "DM_RELAY_LIST_KIND",
    "EXPIRING_KINDS",
    "GIFT_WRAP_KIND",
    "GROUP_MESSAGE_KIND",
    "KEY_PACKAGE_KIND",
    "KEY_PACKAGE_RELAY_LIST_KIND",
    "LIVE_KIND",
    "REGISTERED_AUTHOR_KINDS",
    "RESPONSE_KIND",
    "SESSION_LIST_KIND",
    "WELCOME_KIND",
]

#: NIP-17 gift wrap. DMs and Marmot welcomes ride inside; the wrap is signed by a one-off key.
GIFT_WRAP_KIND: Final = 1059
#: NIP-17 DM relay list (replaceable).
DM_RELAY_LIST_KIND: Final = 10050
#: Marmot/MLS KeyPackage (MIP-00; 30443, not 443). Addressable, so it needs a ``d`` tag.
KEY_PACKAGE_KIND: Final = 30443
#: Marmot welcome rumor: only ever travels inside a 1059, never published bare.
WELCOME_KIND: Final = 444
#: Marmot group message, signed by ephemeral MLS-exporter-derived keys, routed by its ``h`` tag.
GROUP_MESSAGE_KIND: Final = 445
#: Marmot KeyPackage relay list (replaceable).
KEY_PACKAGE_RELAY_LIST_KIND: Final = 10051

#: The bridge protocol's own kinds: all a bridge's embedded relay carries.
CODEDECK_KINDS: Final = frozenset({SESSION_LIST_KIND, LIVE_KIND, COMMAND_KIND, RESPONSE_KIND})

#: Kinds whose author must be a registered pubkey. A 4515 from an unregistered author is the one
#: exception (pairing through an open window, see ``policies.registered_author``).
REGISTERED_AUTHOR_KINDS: Final = frozenset(
    {
        SESSION_LIST_KIND,
        LIVE_KIND,
        COMMAND_KIND,
        RESPONSE_KIND,
        DM_RELAY_LIST_KIND,
        KEY_PACKAGE_RELAY_LIST_KIND,
        # A KeyPackage is signed by its owner's identity key, not an ephemeral one, so the general
        # rule of a private relay (registered writers only) applies to it as well.
        KEY_PACKAGE_KIND,
    }
)

#: Everything this relay stores or broadcasts. Anything else is refused: it is a private relay.
ACCEPTED_KINDS: Final = REGISTERED_AUTHOR_KINDS | {GIFT_WRAP_KIND, GROUP_MESSAGE_KIND}

#: Kinds that must carry a NIP-40 ``expiration`` no more than an hour ahead (v10: commands and
#: responses expire at ``created_at + 3600``).
EXPIRING_KINDS: Final = frozenset({COMMAND_KIND, RESPONSE_KIND})

#: Addressable kinds for which a missing ``d`` tag is refused rather than read as ``d=""``.
ADDRESSABLE_NEEDS_D_TAG: Final = frozenset({KEY_PACKAGE_KIND})
