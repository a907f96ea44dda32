"""The embedded relay: a real relay (rust-nostr's LocalRelay) run inside the daemon.

With no relay configured the bridge serves its own, so a first run works with no account and no
third party: ``127.0.0.1:7777`` for this machine, or ``0.0.0.0:7777`` to serve a phone on the LAN.
Events are kept in an LMDB database under the bridge home, so stored responses (4516) and the
heartbeat (30515) survive a restart of the daemon like they would on any relay.

Only the bridge and its paired phones may write (a private relay): the write policy asks an
``admit`` callback, which the daemon answers from its own state. The policy runs on the daemon's
event loop; anything it raises becomes a reject (an exception escaping into nostr-sdk would abort
the whole process).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import logging
import re
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import nostr_sdk

from bridge.engine.core import Engine
from relaypolicy.embedded import EmbeddedPolicy
from relaypolicy.pipeline import RelayPolicy
from relaypolicy.registry import PubkeyRegistry

__all__ = [
    "AdmitDecision",
    "EmbeddedRelay",
    "EmbeddedRelayError",
    "EngineRegistry",
    "lan_address",
    "private_relay",
    "shutdown_local_relay",
]

logger = logging.getLogger(__name__)

AdmitDecision = tuple[bool, str]
"""(accepted, reason); the reason is the OK message's text after ``blocked:``."""

Admit = Callable[[dict[str, Any], str], AdmitDecision]
"""(event as a NIP-01 dict, source ip) → decision. Synchronous: it must not block."""

_NIP01_PREFIX = re.compile(
    r"(?:duplicate|pow|blocked|rate-limited|invalid|restricted|mute|error|auth-required): "
)


class EmbeddedRelayError(Exception):
    """The embedded relay could not start (address in use, bad address, database)."""


def _source_ip(socket_addr: str) -> str:
    host = socket_addr.rsplit(":", 1)[0] if ":" in socket_addr else socket_addr
    return host.strip("[]")


class _WritePolicy(nostr_sdk.WritePolicy):  # type: ignore[misc]
    def __init__(self, admit: Admit) -> None:
        self._admit = admit

    async def admit_event(self, event: Any, socket_addr: str) -> Any:
        result = nostr_sdk.WritePolicyResult
        try:
            accepted, reason = self._admit(json.loads(event.as_json()), _source_ip(socket_addr))
        except Exception:
            logger.exception("! embedded relay: write policy failed; rejecting the event")
            return result.REJECT("internal error")
        if accepted:
            return result.ACCEPT()
        # nostr-sdk always prefixes "blocked: "; avoid "blocked: restricted: …".
        return result.REJECT(_NIP01_PREFIX.sub("", reason, count=1))


def lan_address() -> str | None:
    """This machine's address on its LAN, as phones would dial it (None if unknown).

    Asks the kernel which source address it would use for an outside destination; a UDP
    "connect" sends no packet.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # TEST-NET-1: never routed anywhere real
            address = str(probe.getsockname()[0])
        except OSError:
            return None
    return None if ipaddress.ip_address(address).is_loopback else address


class EmbeddedRelay:
    """A LocalRelay bound to `host`:`port` with a write policy, optionally persistent.

    Args:
        host: the address to bind (an IP address).
        port: the port; 0 picks a free one.
        admit: the write policy (see :data:`Admit`); ``None`` admits everything.
        lmdb_dir: keep events in an LMDB database there; ``None`` keeps them in memory.
        notes_per_minute / max_reqs: per-connection rate limits.
    """

    def __init__(
        self,
        host: str,
        port: int,
        *,
        admit: Admit | None = None,
        lmdb_dir: Path | None = None,
        notes_per_minute: int = 6_000,
        max_reqs: int = 500,
    ) -> None:
        self.host = host
        self.port = port
        self._admit = admit
        self._lmdb_dir = lmdb_dir
        self._database: Any = None
        self._rate_limit = nostr_sdk.RateLimit(max_reqs=max_reqs, notes_per_minute=notes_per_minute)
        self._relay: Any = None

    @property
    def running(self) -> bool:
        return self._relay is not None

    @property
    def local_url(self) -> str:
        """The URL the daemon itself dials (loopback when bound to every address)."""
        host = self.host
        if host in ("0.0.0.0", "::"):
            host = "127.0.0.1"
        if ":" in host:
            host = f"[{host}]"
        return f"ws://{host}:{self.port}"

    def public_url(self) -> str:
        """The URL phones dial: the LAN address when bound to every address, else the bind."""
        if self.host in ("0.0.0.0", "::"):
            lan = lan_address()
            if lan is not None:
                return f"ws://{lan}:{self.port}"
        return self.local_url

    async def start(self) -> None:
        """Bind and serve. Raises :class:`EmbeddedRelayError` with the fix when it cannot."""
        if self._relay is not None:
            return
        nostr_sdk.uniffi_set_event_loop(asyncio.get_running_loop())
        if self._lmdb_dir is not None and self._database is None:
            self._lmdb_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
            try:
                self._database = await nostr_sdk.NostrLmdb.open(str(self._lmdb_dir))
            except nostr_sdk.NostrSdkError as exc:
                raise EmbeddedRelayError(
                    f"cannot open the embedded relay's database {self._lmdb_dir}: {exc}"
                ) from None
        builder = nostr_sdk.LocalRelayBuilder().addr(self.host).rate_limit(self._rate_limit)
        if self.port:  # without a port the relay picks a free one and reports it in url()
            builder = builder.port(self.port)
        if self._database is not None:
            builder = builder.database(self._database)
        if self._admit is not None:
            builder = builder.write_policy(_WritePolicy(self._admit))
        relay = builder.build()
        try:
            await relay.run()
        except nostr_sdk.NostrSdkError as exc:
            detail = str(exc)
            hint = (
                "another program uses that port; stop it or choose --embedded-relay HOST:PORT"
                if "in use" in detail
                else "check --embedded-relay"
            )
            raise EmbeddedRelayError(
                f"the embedded relay cannot listen on {self.host}:{self.port} ({detail}); {hint}"
            ) from None
        url = str(await relay.url())
        self.port = int(url.rstrip("/").rsplit(":", 1)[1])
        self._relay = relay
        logger.info("embedded relay listening on %s:%d", self.host, self.port)

    async def stop(self) -> None:
        """Close the listener and drop every connection (idempotent)."""
        relay, self._relay = self._relay, None
        if relay is not None:
            probe = "127.0.0.1" if self.host in ("0.0.0.0", "::") else self.host
            if not await shutdown_local_relay(relay, probe, self.port):
                logger.warning("! embedded relay on port %d still accepts connections", self.port)
            logger.info("embedded relay stopped")


SETTLE_SECONDS = 0.05
STOP_WAIT_SECONDS = 5.0


async def _accepts(host: str, port: int) -> bool:
    try:
        _, writer = await asyncio.open_connection(host, port)
    except OSError:
        return False
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return True


async def shutdown_local_relay(relay: Any, host: str, port: int) -> bool:
    """Stop a LocalRelay for sure; True once its port refuses connections.

    ``LocalRelay.shutdown()`` is a one-shot signal that tasks starting late miss (measured: the
    listener ignores it about 1 time in 8 right after ``run()`` or under load, and a connection
    whose handshake just finished keeps being served). Calling it again reaches them, so: settle,
    call it every 20 ms until the port refuses, then once more for late connection handlers.
    """
    loop = asyncio.get_running_loop()
    await asyncio.sleep(SETTLE_SECONDS)
    deadline = loop.time() + STOP_WAIT_SECONDS
    stopped = False
    while True:
        relay.shutdown()
        await asyncio.sleep(0.02)
        if not await _accepts(host, port):
            stopped = True
            break
        if loop.time() > deadline:
            break
    relay.shutdown()
    return stopped


# --- the daemon's registry, as the relay policy asks it ----------------------------------------


class EngineRegistry:
    """relaypolicy's :class:`~relaypolicy.registry.PubkeyRegistry`, answered live by the engine.

    Registered writers are the bridge itself and its paired phones; the bridge has a pairing
    window while the engine holds one. Nothing is copied, so nothing can fall out of step. Until
    the engine exists (the relay starts first) only the bridge is registered.
    """

    def __init__(self, bridge_pubkey: str, engine: Callable[[], Engine | None]) -> None:
        self._bridge = bridge_pubkey
        self._engine = engine

    def is_registered(self, pubkey: str) -> bool:
        engine = self._engine()
        return pubkey == self._bridge or (engine is not None and engine.phone(pubkey) is not None)

    def pairing_window_until(self, pubkey: str) -> int | None:
        engine = self._engine()
        if engine is None or pubkey != self._bridge:
            return None
        return engine.pairing_window_until()


def private_relay(
    host: str,
    port: int,
    *,
    registry: PubkeyRegistry,
    lmdb_dir: Path,
    clock: Callable[[], float],
) -> EmbeddedRelay:
    """The embedded relay with the private relay's own write policy (relaypolicy): only the
    registered writers may write, and the pairing window while one is open (rate-limited per
    IP, like the deployed relay)."""
    policy = EmbeddedPolicy(RelayPolicy(registry), clock=clock)
    return EmbeddedRelay(host, port, admit=policy.admit, lmdb_dir=lmdb_dir)
