"""The embedded relay as the daemon runs it (its own thread, SQLite on disk), with a write policy
that lets only the bridge's and the phone's keys write; shared by the relay's integration tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bridge.nostr.keys import Keypair
from bridge.runtime.edges.embedded_relay import EmbeddedRelay

BRIDGE = Keypair.from_secret("51" * 32)
PHONE = Keypair.from_secret("52" * 32)
STRANGER = Keypair.from_secret("53" * 32)


class Policy:
    """Only BRIDGE and PHONE write; counts the questions and records who asked from where.

    Content ``explode`` raises, as a policy with a bug would.
    """

    def __init__(self) -> None:
        self.asked = 0
        self.addresses: dict[str, set[str]] = {}

    def __call__(self, event: dict[str, Any], ip: str) -> tuple[bool, str]:
        self.asked += 1
        self.addresses.setdefault(event["pubkey"], set()).add(ip)
        assert ip == "127.0.0.1"
        if event["content"] == "explode":
            raise RuntimeError("a policy bug")
        if event["pubkey"] in (BRIDGE.public_hex, PHONE.public_hex):
            return True, ""
        return False, "restricted: not a registered writer"


@pytest.fixture
def policy() -> Policy:
    return Policy()


@pytest.fixture
async def relay(tmp_path: Path, policy: Policy) -> AsyncIterator[EmbeddedRelay]:
    running = EmbeddedRelay("127.0.0.1", 0, admit=policy, database_dir=tmp_path / "relay")
    await running.start()
    try:
        yield running
    finally:
        await running.stop()
