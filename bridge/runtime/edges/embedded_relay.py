"""The embedded relay: the project's own relay (:mod:`bridge.relay`) run inside the daemon.

With no relay configured the bridge serves its own, so a first run works with no account and no
third party: ``127.0.0.1:7777`` for this machine, or ``0.0.0.0:7777`` to serve a phone on the LAN.
Events are kept in SQLite under the bridge home (``relay/events.sqlite3``), so stored responses
(4516) and the heartbeat (30515) survive a restart of the daemon like they would on any relay.

Only the bridge and its paired phones may write (a private relay): the write policy asks an
``admit`` callback, which the daemon answers from its own state through relaypolicy
(:func:`relaypolicy.embedded.embedded_policy`: the four CodeDeck kinds, from registered writers,
and a new phone's pair-request while a window is open). The store is capped
(``embedded_relay_max_mb``); a full store refuses new events, and the bridge's own replies stay
in its outbox and go out again once expired ones made room.

Reads stay open to any client, as on any relay: every payload is NIP-44 encrypted. What a
stranger's REQ can learn is metadata (which keys talk, which kinds, when); without a certificate
the relay speaks plain ``ws://``, so anyone on the network path sees the same in the frames, and
refusing filters that name no pubkey would only slow enumeration down at the risk of refusing a
client's own filter.

The same port serves CodeDeck Web (:mod:`bridge.webclient`) to browsers, same origin as the
websocket, with a Content-Security-Policy whose ``connect-src`` names this relay's addresses and
the configured relays. With a certificate and key (``embedded_relay_cert``/``embedded_relay_key``)
it speaks TLS: every URL of it says ``wss://``/``https://``, and when it serves the LAN its
public host is the certificate's DNS name (a phone checks the name; it cannot check a bare LAN
address against a certificate issued for a name). A browser needs that secure context for a
service worker, push and the camera; plain ``http://`` is one only on ``127.0.0.1``.

The relay runs on a thread of its own with its own event loop: the daemon's work (a commit, a
signature) never delays a phone's frames, and the relay's SQLite calls and signature checks
release the GIL, so on a machine with two cores the two overlap. The policy is called on the
relay's thread; what it reads of the daemon (the paired phones, the pairing window) are single
dictionary and attribute reads.

Phones dial it by websocket; the daemon's own connection is in process (:meth:`EmbeddedRelay.dial`,
:mod:`bridge.relay.local`): the same frames, without a socket between two threads of one process.

Why a relay of our own rather than rust-nostr's LocalRelay: that one has four defects measured
against this daemon (Nagle's delay, hang-ups under a burst, incomplete stored answers, paired
phones blocked after a burst) — see ``docs/BENCHMARKS.md`` and ARCHITECTURE §7.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import errno
import ipaddress
import logging
import socket
import ssl
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from bridge import __version__
from bridge.engine.core import Engine
from bridge.records import record
from bridge.relay.local import LocalChannel
from bridge.relay.server import Admit, RelayServer
from bridge.relay.site import StaticSite
from bridge.relay.storage import EventStore
from bridge.webclient import NOT_BUILT, load_files
from relaypolicy.embedded import embedded_policy
from relaypolicy.registry import PubkeyRegistry

__all__ = [
    "AdmitDecision",
    "EmbeddedRelay",
    "EmbeddedRelayError",
    "EngineRegistry",
    "TlsFiles",
    "certificate_name",
    "lan_address",
    "private_relay",
    "tls_context",
]

logger = logging.getLogger(__name__)

AdmitDecision = tuple[bool, str]
"""(accepted, reason); the reason is the OK message's text after ``blocked:``."""

DATABASE_NAME = "events.sqlite3"
_OLD_LMDB_FILES = ("data.mdb", "lock.mdb")
STOP_WAIT_SECONDS = 10.0


class EmbeddedRelayError(Exception):
    """The embedded relay could not start (address in use, bad address, database)."""


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


@record
class TlsFiles:
    """The embedded relay's certificate (chain) and its private key, both PEM files."""

    cert: Path
    key: Path

    @classmethod
    def of(cls, cert: Path | None, key: Path | None) -> TlsFiles | None:
        """Both files, or None (the settings check that both or neither are given)."""
        return cls(cert, key) if cert is not None and key is not None else None


def tls_context(files: TlsFiles) -> ssl.SSLContext:
    """A server context for ``files``: TLS 1.2 or later, HTTP/1.1 by ALPN.

    Raises:
        OSError, ssl.SSLError: a file cannot be read, or the key does not fit the certificate.
    """
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(files.cert, files.key)
    context.set_alpn_protocols(["http/1.1"])
    return context


def certificate_name(cert: Path) -> str | None:
    """The first DNS name of the certificate's subjectAltName that a phone can dial (not a
    wildcard, not ``localhost``), or None."""
    from cryptography import x509  # only with TLS

    try:
        loaded = x509.load_pem_x509_certificate(cert.read_bytes())
        names = loaded.extensions.get_extension_for_class(x509.SubjectAlternativeName)
    except (OSError, ValueError, x509.ExtensionNotFound):
        return None
    for name in names.value.get_values_for_type(x509.DNSName):
        if "*" not in name and name != "localhost" and not name.endswith(".localhost"):
            return name
    return None


def _forget_lmdb(directory: Path) -> None:
    """Remove the store of the previous embedded relay (LocalRelay's LMDB) from this home.

    It held only what relays carry (hour-long responses, the heartbeat the daemon re-publishes
    at start), and its memory map reserves a large sparse file.
    """
    for name in _OLD_LMDB_FILES:
        old = directory / name
        if old.exists():
            old.unlink()
            logger.info("embedded relay: removed the previous relay's store %s", old)


class EmbeddedRelay:
    """The relay bound to `host`:`port` with a write policy, on a thread of its own.

    Args:
        host: the address to bind (an IP address).
        port: the port; 0 picks a free one.
        admit: the write policy (see :data:`~bridge.relay.server.Admit`); ``None`` admits all.
        database_dir: keep events in SQLite there; ``None`` keeps them in memory.
        clock: unix seconds (``created_at`` checks, NIP-40 expiry).
        max_stored_bytes: the cap on the stored events' JSON (see :mod:`bridge.relay.storage`);
            ``None`` for no cap.
        tls: serve TLS with these files (``wss://``, ``https://``).
        web: gives the files of the web app to serve on the port (called once, on the relay's
            thread); ``None`` serves no app.
        relays: the other relays the web app may connect to (its CSP's ``connect-src``).
        bridge_pubkey: the bridge's key, whose readers :meth:`connected_phones` reports.
    """

    def __init__(
        self,
        host: str,
        port: int,
        *,
        admit: Admit | None = None,
        database_dir: Path | None = None,
        clock: Callable[[], float] | None = None,
        max_stored_bytes: int | None = None,
        tls: TlsFiles | None = None,
        web: Callable[[], Mapping[str, bytes]] | None = None,
        relays: Sequence[str] = (),
        bridge_pubkey: str | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.tls = tls
        self._web = web
        self._relays = tuple(relays)
        self._bridge_pubkey = bridge_pubkey
        self._public_name = certificate_name(tls.cert) if tls is not None else None
        self._admit = admit
        self._max_stored_bytes = max_stored_bytes
        self._database_dir = database_dir
        self._clock = clock or time.time
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: RelayServer | None = None

    @property
    def running(self) -> bool:
        return self._server is not None

    @property
    def server(self) -> RelayServer | None:
        """The relay itself, for statistics (owned by the relay's thread: read, never call)."""
        return self._server

    @property
    def scheme(self) -> str:
        """``wss`` with a certificate, else ``ws``."""
        return "ws" if self.tls is None else "wss"

    @property
    def local_url(self) -> str:
        """The URL the daemon itself dials (loopback when bound to every address)."""
        host = self.host
        if host in ("0.0.0.0", "::"):
            host = "127.0.0.1"
        if ":" in host:
            host = f"[{host}]"
        return f"{self.scheme}://{host}:{self.port}"

    def public_url(self) -> str:
        """The URL phones dial: when bound to every address, the certificate's DNS name (with
        TLS) or else the LAN address; otherwise the bind."""
        if self.host in ("0.0.0.0", "::"):
            if self._public_name is not None:
                return f"{self.scheme}://{self._public_name}:{self.port}"
            lan = lan_address()
            if lan is not None:
                return f"{self.scheme}://{lan}:{self.port}"
        return self.local_url

    def connected_phones(self) -> frozenset[str]:
        """The pubkeys (hex) of the phones reading the bridge right now: a websocket client
        holds a subscription to the bridge's events (``authors``) addressed to them (``#p``).

        The daemon's own in-process connection never counts. Safe to call from the daemon's
        loop: it reads the relay's snapshot (:meth:`~bridge.relay.server.RelayServer.readers`).
        """
        server = self._server
        if server is None or self._bridge_pubkey is None:
            return frozenset()
        return server.readers(self._bridge_pubkey)

    def _connect_urls(self, port: int) -> list[str]:
        """What the web app's CSP lets it dial: this relay as phones and this machine reach it,
        and the other relays."""
        own = {self.local_url.rsplit(":", 1)[0]}
        if self.host in ("0.0.0.0", "::"):
            lan = lan_address()
            if lan is not None:
                own.add(f"{self.scheme}://{lan}")
            if self._public_name is not None:
                own.add(f"{self.scheme}://{self._public_name}")
        return [*(f"{base}:{port}" for base in sorted(own)), *self._relays]

    async def start(self) -> None:
        """Bind and serve. Raises :class:`EmbeddedRelayError` with the fix when it cannot."""
        if self._server is not None:
            return
        context: ssl.SSLContext | None = None
        if self.tls is not None:
            try:
                context = tls_context(self.tls)
            except (OSError, ssl.SSLError) as exc:
                raise EmbeddedRelayError(
                    f"the embedded relay cannot use the certificate {self.tls.cert} with the key "
                    f"{self.tls.key} ({exc}); check embedded_relay_cert and embedded_relay_key"
                ) from None
        started: concurrent.futures.Future[RelayServer] = concurrent.futures.Future()
        self._thread = threading.Thread(
            target=self._run, args=(started, context), name="embedded-relay", daemon=True
        )
        self._thread.start()
        try:
            server = await asyncio.wrap_future(started)
        except OSError as exc:
            await asyncio.to_thread(self._thread.join)
            self._thread = None
            hint = (
                "another program uses that port; stop it or choose --embedded-relay HOST:PORT"
                if exc.errno == errno.EADDRINUSE
                else "check --embedded-relay"
            )
            raise EmbeddedRelayError(
                f"the embedded relay cannot listen on {self.host}:{self.port} "
                f"({exc.strerror or exc}); {hint}"
            ) from None
        except Exception as exc:  # the database
            await asyncio.to_thread(self._thread.join)
            self._thread = None
            raise EmbeddedRelayError(
                f"cannot open the embedded relay's database in {self._database_dir}: {exc}"
            ) from None
        self.port = server.port
        self._server = server
        logger.info(
            "embedded relay listening on %s:%d (%s)",
            self.host,
            self.port,
            "TLS: wss:// and https://" if self.tls is not None else "ws:// and http://",
        )

    def _site(self) -> StaticSite | None:
        """The web app's site (its files loaded and compressed here, once), or None."""
        if self._web is None:
            return None
        try:
            files = self._web()
        except OSError as exc:
            logger.warning("! embedded relay: cannot read the web client's files (%s)", exc)
            files = {}
        if not files:
            logger.info("embedded relay: the web client is not built; / says how to build it")
        return StaticSite(files, missing=NOT_BUILT)

    def _run(
        self, started: concurrent.futures.Future[RelayServer], context: ssl.SSLContext | None
    ) -> None:
        """The relay thread: open the store, listen, serve until :meth:`stop`."""
        loop = asyncio.new_event_loop()
        self._loop = loop
        store: EventStore | None = None
        try:
            site = self._site()
            if self._database_dir is not None:
                self._database_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
                _forget_lmdb(self._database_dir)
                store = EventStore(
                    self._database_dir / DATABASE_NAME, max_bytes=self._max_stored_bytes
                )
            else:
                store = EventStore(None, max_bytes=self._max_stored_bytes)
            server = RelayServer(
                self.host,
                self.port,
                store=store,
                admit=self._admit,
                clock=self._clock,
                version=__version__,
                site=site,
                tls=context,
            )
            loop.run_until_complete(server.start())
            if site is not None:
                site.connect_to(self._connect_urls(server.port))
        except BaseException as exc:
            if store is not None:
                store.close()
            loop.close()
            started.set_exception(exc)
            return
        started.set_result(server)
        try:
            loop.run_forever()
            loop.run_until_complete(server.close())
        finally:
            store.close()
            loop.close()

    async def dial(self) -> LocalChannel:
        """A connection to this relay from the daemon's own loop, in process (no socket).

        What the daemon's relay pool uses instead of dialing :attr:`local_url` (see
        :mod:`bridge.relay.local` for why). Raises :class:`ConnectionRefusedError` when the
        relay is not running, as a socket's connect would.
        """
        loop, server = self._loop, self._server
        if loop is None or server is None or loop.is_closed():
            raise ConnectionRefusedError(f"the embedded relay on port {self.port} is not running")
        try:
            accepted = asyncio.run_coroutine_threadsafe(
                server.accept_local(asyncio.get_running_loop()), loop
            )
        except RuntimeError as exc:  # its loop closed meanwhile
            raise ConnectionRefusedError(f"the embedded relay is stopping: {exc}") from None
        answer = asyncio.wrap_future(accepted)
        try:
            # Shielded: cancelling the wait must not cancel an accept the relay may have made.
            return await asyncio.shield(answer)
        except asyncio.CancelledError:
            answer.add_done_callback(_abort_unclaimed)  # nobody will read that link: close it
            raise

    async def stop(self) -> None:
        """Close the listener and drop every connection (idempotent)."""
        loop, thread, self._server = self._loop, self._thread, None
        self._thread = None
        if loop is None or thread is None:
            return
        with contextlib.suppress(RuntimeError):  # the loop is already closed
            loop.call_soon_threadsafe(loop.stop)
        await asyncio.to_thread(thread.join, STOP_WAIT_SECONDS)
        if thread.is_alive():
            logger.warning("! embedded relay on port %d did not stop in time", self.port)
        else:
            logger.info("embedded relay stopped")


def _abort_unclaimed(answer: asyncio.Future[LocalChannel]) -> None:
    if not answer.cancelled() and answer.exception() is None:
        answer.result().abort()


# --- the daemon's registry, as the relay policy asks it ----------------------------------------


class EngineRegistry:
    """relaypolicy's :class:`~relaypolicy.registry.PubkeyRegistry`, answered live by the engine.

    Registered writers are the bridge itself and its paired phones; the bridge has a pairing
    window while the engine holds one. Nothing is copied, so nothing can fall out of step. Until
    the engine exists (the relay starts first) only the bridge is registered.

    Called on the relay's thread while the engine runs on the daemon's: each answer is one
    dictionary lookup or attribute read, which the GIL makes atomic. Keep it that way (nothing
    here may iterate the engine's state, which the daemon's thread may be changing).
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
    database_dir: Path,
    clock: Callable[[], float],
    max_stored_bytes: int | None,
    bridge_pubkey: str | None = None,
    tls: TlsFiles | None = None,
    relays: Sequence[str] = (),
) -> EmbeddedRelay:
    """The embedded relay with a private relay's write policy (:func:`relaypolicy.embedded.
    embedded_policy`): the four CodeDeck kinds, written only by the registered writers (this
    bridge and its paired phones), and a new phone's 4515 to the bridge while a pairing window
    is open (rate-limited per IP, like the deployed relay); the store capped at
    ``max_stored_bytes``; CodeDeck Web on the same port; TLS with ``tls``."""
    policy = embedded_policy(registry, clock=clock)
    return EmbeddedRelay(
        host,
        port,
        admit=policy.admit,
        database_dir=database_dir,
        clock=clock,
        max_stored_bytes=max_stored_bytes,
        tls=tls,
        web=load_files,
        relays=relays,
        bridge_pubkey=bridge_pubkey,
    )
