"""Helpers for the settings-command integration tests (tests/integration/test_daemon_settings.py).

- :class:`PhonePair` pairs phones with a daemon and taps every plaintext the bridge sends them
  (before the decoder strips unknown keys), so a secret leaked in any field is caught.
- :func:`assert_secrets_kept` scans those plaintexts, the decoded messages and the daemon's log.
- :func:`probe_reply` is the probe target's behaviour: the first path segment of a provider's
  ``baseUrl`` (``/ok``, ``/unauthorized``, ``/forbidden``, ``/broken``, ``/hang``) or the second
  word of an API key (``sk-ok-…``) picks the answer, so one server plays every case.
- :func:`wait_for_log` polls the daemon's log for a refusal line.
- Builders and round trips: :func:`write` (a profile write, ``token`` tri-state), :func:`set_profile`
  (its ack and the list after it), :func:`profiles`, :func:`set_credentials`,
  :func:`create_session` / :func:`session_fails`, :func:`raw_profile` (JSON the codec refuses).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import sqlite3
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from bridge.nostr.nip44 import ConversationKeyCache, decrypt
from bridge.nostr.relay import RelayEventReceived
from bridge.protocol import (
    KEEP,
    CreateSessionCommand,
    InputCommand,
    ProviderProfilesRequestCommand,
    SetCredentialsCommand,
    SetProviderProfileCommand,
)
from bridge.protocol.capabilities import ALL_PHONE_CAPABILITIES
from bridge.protocol.primitives import Keep
from bridge.protocol.shared import ModelEntry, ProviderProfileWrite
from tests.support.daemon import DaemonProcess
from tests.support.http_servers import RecordedRequest, Reply
from tests.support.phone import PhoneSimulator
from tests.support.phone_state import Received

__all__ = [
    "BEHAVIOURS",
    "WAIT",
    "PhonePair",
    "assert_secrets_kept",
    "create_session",
    "echo_round_trip",
    "make_secret",
    "probe_reply",
    "profiles",
    "query_db",
    "raw_profile",
    "session_fails",
    "set_credentials",
    "set_profile",
    "stored_profile",
    "wait_for_log",
    "write",
]

WAIT = 30.0
"""Seconds a reply may take (generous: the machine may be busy; waits end early)."""

BEHAVIOURS: dict[str, Reply] = {
    "ok": Reply(200, b'{"type":"message"}'),
    "unauthorized": Reply(401, b'{"type":"error"}'),
    "forbidden": Reply(403, b'{"type":"error"}'),
    "broken": Reply(500, b'{"type":"error"}'),
    "hang": Reply(hang=True),
}
"""What the probe target answers, by behaviour name."""


def make_secret(behaviour: str = "ok") -> str:
    """A unique credential whose second word names the probe target's answer (``sk-ok-…``)."""
    return f"sk-{behaviour}-{secrets.token_hex(16)}"


def probe_reply(request: RecordedRequest) -> Reply:
    """The probe target: key probes go to ``/key/…`` (answer by key), provider probes to
    ``/<behaviour>/…``."""
    first = request.path.strip("/").split("/")[0]
    if first == "key":
        parts = request.headers.get("x-api-key", "").split("-")
        first = parts[1] if len(parts) > 2 else "unauthorized"
    return BEHAVIOURS.get(first, Reply(404))


class PhonePair:
    """Pairs phones with a daemon, taps their plaintexts, closes them at the end."""

    def __init__(self, relay_url: str) -> None:
        self.relay_url = relay_url
        self.phones: list[PhoneSimulator] = []
        self.plaintexts: dict[str, list[str]] = {}

    async def pair(self, daemon: DaemonProcess, label: str = "Pixel") -> PhoneSimulator:
        """A phone paired through the QR window, online, with the first heartbeat in."""
        opened = await daemon.call("pair.open", duration=600)
        phone = PhoneSimulator(relays=[self.relay_url], label=label)
        self._tap(phone)
        self.phones.append(phone)
        ack = await phone.pair(opened["url"])
        assert ack.message.ok, ack.message
        await phone.wait_for("sessions", timeout=WAIT)
        return phone

    def _tap(self, phone: PhoneSimulator) -> None:
        # The pool binds `phone.handle_event` when it connects: an instance attribute set now
        # sees every event first.
        seen = self.plaintexts.setdefault(phone.pubkey, [])
        keys = ConversationKeyCache(phone.keypair.secret)
        original = phone.handle_event

        def handle(delivered: RelayEventReceived) -> None:
            event = delivered.event
            if event.pubkey == phone.bridge_pubkey:
                with contextlib.suppress(Exception):
                    seen.append(decrypt(event.content, keys.get(event.pubkey)))
            original(delivered)

        phone.handle_event = handle  # type: ignore[method-assign]

    async def close(self) -> None:
        for phone in self.phones:
            await phone.close()


def _needles(secret: str) -> list[str]:
    # The secret itself, and a prefix of its random part: a truncated leak counts too.
    core = secret.rsplit("-", 1)[-1]
    return [secret, core[:12]]


def assert_secrets_kept(daemon: DaemonProcess, pairs: PhonePair, found: Iterable[str]) -> None:
    """No secret (nor a 12-character piece of one) in any phone-bound payload or log line."""
    log = daemon.log_text
    assert log, "the daemon wrote no log at all"
    for phone in pairs.phones:
        assert pairs.plaintexts.get(phone.pubkey), "the plaintext tap saw nothing"
    for secret in found:
        for needle in _needles(secret):
            assert needle not in log, "a secret appears in the daemon's log"
            for phone in pairs.phones:
                for text in pairs.plaintexts.get(phone.pubkey, []):
                    assert needle not in text, "a secret appears in a bridge -> phone payload"
                for item in phone.received:
                    assert needle not in item.message.model_dump_json()
                for invalid in phone.invalid:
                    assert needle not in invalid.error


async def wait_for_log(
    daemon: DaemonProcess, needle: str, count: int = 1, timeout: float = WAIT
) -> str:
    """Wait until `needle` appears `count` times in the daemon's log; return the log."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        text = daemon.log_text
        if text.count(needle) >= count:
            return text
        if loop.time() >= deadline:
            tail = "\n".join(text.splitlines()[-15:])
            raise AssertionError(
                f"{needle!r} appeared {text.count(needle)} of {count} times in the daemon's log "
                f"within {timeout:g} s; its last lines:\n{tail}"
            )
        await asyncio.sleep(0.05)


def query_db(home: Path, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Read the daemon's database (WAL: safe while it runs)."""
    with contextlib.closing(sqlite3.connect(home / "bridge.db")) as conn:
        return list(conn.execute(sql, params).fetchall())


# --- commands and their replies -----------------------------------------------------------------


def write(
    base_url: str,
    *,
    label: str = "Kimi",
    token: str | Keep | None = KEEP,
    models: tuple[str, ...] = ("kimi-k3",),
    default_model: str | None = None,
) -> ProviderProfileWrite:
    """A profile write; `token` is tri-state (KEEP: the key is absent)."""
    extra: dict[str, Any] = {} if token is KEEP else {"authToken": token}
    return ProviderProfileWrite(
        label=label,
        baseUrl=base_url,
        models=[ModelEntry(id=m) for m in models],
        defaultModel=default_model,
        **extra,
    )


async def set_profile(
    phone: PhoneSimulator,
    profile_id: str,
    profile: ProviderProfileWrite | None,
    timeout: float = WAIT,
) -> tuple[Received[Any], Received[Any] | None]:
    """Send ``set-provider-profile``; return its ack and the list that follows it (if any)."""
    mark = phone.mark()
    await phone.send(SetProviderProfileCommand(profileId=profile_id, profile=profile))
    ack = await phone.wait_for(
        "provider-profile-ack", lambda m: m.profileId == profile_id, after=mark, timeout=timeout
    )
    if not ack.message.success:
        return ack, None
    listing = await phone.wait_for("provider-profiles", after=ack.index, timeout=WAIT)
    return ack, listing


async def profiles(phone: PhoneSimulator) -> dict[str, Any]:
    """The answer to ``provider-profiles-request``: id → ProviderProfileInfo."""
    reply = await phone.request(ProviderProfilesRequestCommand(), "provider-profiles", timeout=WAIT)
    return {p.id: p for p in reply.message.profiles}


async def set_credentials(phone: PhoneSimulator, **fields: Any) -> Any:
    """``set-credentials`` → its ``credentials-ack`` message."""
    reply = await phone.request(SetCredentialsCommand(**fields), "credentials-ack", timeout=WAIT)
    return reply.message


async def create_session(phone: PhoneSimulator, **fields: Any) -> str:
    """``create-session`` → pending → ready; the new session's id."""
    mark = phone.mark()
    await phone.send(CreateSessionCommand(**fields))
    pending = await phone.wait_for("session-pending", after=mark, timeout=WAIT)
    ready = await phone.wait_for("session-ready", after=mark, timeout=WAIT)
    assert ready.message.pendingId == pending.message.pendingId
    return str(ready.message.session.id)


async def session_fails(phone: PhoneSimulator, **fields: Any) -> str:
    """``create-session`` → pending → failed (never ready); the reason."""
    mark = phone.mark()
    await phone.send(CreateSessionCommand(**fields))
    pending = await phone.wait_for("session-pending", after=mark, timeout=WAIT)
    failed = await phone.wait_for("session-failed", after=mark, timeout=WAIT)
    assert failed.message.pendingId == pending.message.pendingId
    assert phone.count("session-ready", after=mark) == 0
    return str(failed.message.reason)


def raw_profile(profile_id: str, base_url: str, token: str) -> str:
    """A ``set-provider-profile`` the codec would refuse to encode (hand-written JSON)."""
    return json.dumps(
        {
            "type": "set-provider-profile",
            "profileId": profile_id,
            "profile": {
                "label": profile_id,
                "baseUrl": base_url,
                "authToken": token,
                "models": [{"id": "m-1"}],
            },
            "v": 10,
            "caps": list(ALL_PHONE_CAPABILITIES),
        }
    )


def stored_profile(daemon: DaemonProcess, profile_id: str) -> dict[str, Any] | None:
    """The stored record of a profile (token included), or None."""
    rows = query_db(daemon.home, "SELECT record FROM provider_profiles WHERE id = ?", (profile_id,))
    return json.loads(rows[0][0]) if rows else None


async def echo_round_trip(phone: PhoneSimulator, session: str, text: str) -> None:
    """A plain input answered: everything the daemon had queued before it went through."""
    mark = phone.mark()
    await phone.send(InputCommand(sessionId=session, text=text))
    await phone.wait_for(
        "output", lambda m: m.entry.content == f"echo: {text}", after=mark, timeout=WAIT
    )
