"""Where the bridge's key comes from: a key file / systemd credential, or the store.

The key is what every paired phone trusts, so it is created once and kept: generated on the
first run and saved in the bridge database, or read from a file the operator provides
(``--key-file``, or ``$CREDENTIALS_DIRECTORY/nsec`` under systemd ``LoadCredential=``). A key
file must not be readable by group or others. The key never reaches a log line.
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

from bridge.nostr.keys import Keypair, NostrKeyError
from store.db import BridgeDatabase
from store.identity import load_identity, save_identity

__all__ = ["IdentityError", "load_or_create_identity", "read_key_file"]

logger = logging.getLogger(__name__)


class IdentityError(Exception):
    """The configured key cannot be used; the message says why and how to fix it."""


def read_key_file(path: Path) -> Keypair:
    """Read an ``nsec1…`` or 64-hex secret key from `path` (first non-empty line).

    Raises:
        IdentityError: missing, unreadable, group/world-readable, or not a valid key.
    """
    try:
        info = path.stat()
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise IdentityError(
            f"key file {path} does not exist; create it or drop --key-file"
        ) from None
    except OSError as exc:
        raise IdentityError(f"cannot read key file {path}: {exc.strerror}") from None
    if info.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise IdentityError(
            f"key file {path} is readable by other users (mode {stat.S_IMODE(info.st_mode):o}); "
            f"run: chmod 600 {path}"
        )
    value = next((line.strip() for line in text.splitlines() if line.strip()), "")
    try:
        return Keypair.from_secret(value)
    except NostrKeyError:
        # The reason may quote parts of the value: never echo it.
        raise IdentityError(
            f"key file {path} does not hold a valid secret key (expected nsec1… or 64 hex digits)"
        ) from None


async def load_or_create_identity(db: BridgeDatabase, key_file: Path | None) -> Keypair:
    """The bridge keypair: from `key_file` when configured, else from the store (made once).

    Raises:
        IdentityError: the key file cannot be used, or the stored key is not a valid key.
    """
    if key_file is not None:
        keypair = read_key_file(key_file)
        logger.info("identity %s (from key file)", keypair.npub)
        return keypair
    secret = await load_identity(db)
    if secret is not None:
        try:
            keypair = Keypair.from_secret(secret)
        except NostrKeyError:
            raise IdentityError(
                f"{db.path} holds an invalid bridge key; restore the database from a backup"
            ) from None
        logger.info("identity %s", keypair.npub)
        return keypair
    keypair = Keypair.generate(os.urandom)
    await save_identity(db, keypair.secret)
    logger.info("identity %s (new: first run)", keypair.npub)
    return keypair
