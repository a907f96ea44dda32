"""Real relays for tests, on 127.0.0.1: rust-nostr's LocalRelay, and a scripted one.

:class:`LoopbackRelay` runs ``nostr_sdk.LocalRelay`` (a real relay implementation: signature
checks, replaceable/addressable storage, ephemeral kinds, NIP-40, NIP-42) inside the test's
event loop process, on Rust threads. Use it through the ``relay`` / ``relay_factory``
fixtures of ``tests/conftest.py`` or as ``async with LoopbackRelay(...) as relay``.

Write policies. Pass any object with::

    async def admit_event(self, event_json: dict[str, Any], source_ip: str) -> tuple[bool, str]

``event_json`` is the NIP-01 event as a dict; ``source_ip`` is the client's address without
port (``"127.0.0.1"``). Return ``(True, "")`` to accept or ``(False, reason)`` to reject; the
client then gets ``OK false "blocked: <reason>"`` (the FFI always prefixes ``blocked:``, so a
NIP-01 prefix the policy put on ``reason`` is stripped to avoid ``blocked: blocked: …``). The
policy sees only events the relay already validated (id, signature, expiry, duplicates), in
the relay's order of checks. The adapter makes any policy safe to run:

* an exception (or a malformed return value) becomes ``REJECT("internal error")`` and is
  logged; it never reaches the FFI, where it would abort the process (nostr-sdk panics with
  "Callback interface failure");
* with ``policy_timeout`` set, a policy slower than that is cancelled and rejected the same
  way (strfry's fail-closed behaviour for a hung plugin);
* on :meth:`LoopbackRelay.stop` every decision still pending is cancelled and answered
  ``REJECT("relay shutting down")``, so a hanging policy cannot outlive its relay or the
  event loop. :class:`SilentPolicy` uses that to make a relay that never answers OK.

Note: LocalRelay handles one connection's messages in order, so while a policy holds an
EVENT, later REQs on that connection wait too.

Gotchas handled here (see shared/notes/relays-and-policy.md):

* ``uniffi_set_event_loop`` must point at the running loop or Python policies hang; each
  test has its own loop, so :meth:`LoopbackRelay.start` sets it every time.
* The default rate limit (60 notes a minute per connection) is raised.
* ``LocalRelay.shutdown()`` is a broadcast that tasks which subscribe late miss. Measured
  here: (1) right after ``run()`` (or under load) the accept loop misses it about 1 time in
  8 and then accepts connections forever; (2) a connection whose handshake finished just
  before keeps being served (2 in 200 stops issued right after a connect). Calling
  ``shutdown()`` again reaches them. :meth:`stop` therefore (through the product's
  :func:`shutdown_local_relay`) waits a moment, then
  calls ``shutdown()`` every 20 ms until the port refuses connections (at most 3 calls in
  100 runs), then once more, so that when it returns the relay is really gone. A stopped
  relay closes its connections without a close frame (clients see 1006).
  The relay's two tokio runtime threads are shared by all relays and stay for the process.
* The in-memory database lives and dies with a relay instance. To keep events across
  :meth:`LoopbackRelay.restart`, pass ``lmdb_dir`` (NostrLmdb, opened once and reused);
  :meth:`LoopbackRelay.save_event` then writes into it directly, even while stopped.

:class:`ScriptedRelay` is a tiny ``websockets`` server that sends whatever frames the test
tells it to and records what clients send, for bad-input and protocol tests.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol

import nostr_sdk
from websockets.asyncio.server import Server, ServerConnection, serve

__all__ = [
    "LoopbackRelay",
    "ScriptedRelay",
    "SilentPolicy",
    "TcpProxy",
    "WritePolicyHook",
]

logger = logging.getLogger(__name__)

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


_NIP01_PREFIX = re.compile(
    r"(?:duplicate|pow|blocked|rate-limited|invalid|restricted|mute|error|auth-required): "
)
_BIND_RETRY_SECONDS = 5.0
_STOP_WAIT_SECONDS = 5.0


class WritePolicyHook(Protocol):
    """What a test write policy implements (see the module docstring)."""

    async def admit_event(self, event_json: dict[str, Any], source_ip: str) -> tuple[bool, str]:
        """Decide on one event: ``(accepted, reason)``."""
        ...


class SilentPolicy:
    """A policy that never decides: the relay never answers OK (until it is stopped)."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        """Ids of the events that reached the policy."""

    async def admit_event(self, event_json: dict[str, Any], source_ip: str) -> tuple[bool, str]:
        self.seen.append(event_json["id"])
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


def _source_ip(socket_addr: str) -> str:
    host = socket_addr.rsplit(":", 1)[0] if ":" in socket_addr else socket_addr
    return host.strip("[]")


class _PolicyAdapter(nostr_sdk.WritePolicy):  # type: ignore[misc]
    """Wraps a :class:`WritePolicyHook` into nostr-sdk's WritePolicy, failing closed."""

    def __init__(self, hook: WritePolicyHook, timeout: float | None) -> None:
        self._hook = hook
        self._timeout = timeout
        self._pending: set[asyncio.Task[tuple[bool, str]]] = set()
        self._stopping = False

    async def admit_event(self, event: Any, socket_addr: str) -> Any:
        result = nostr_sdk.WritePolicyResult
        if self._stopping:
            return result.REJECT("relay shutting down")
        try:
            event_json = json.loads(event.as_json())
            decision = asyncio.ensure_future(
                self._hook.admit_event(event_json, _source_ip(socket_addr))
            )
            self._pending.add(decision)
            try:
                async with asyncio.timeout(self._timeout):
                    accepted, reason = await decision
            finally:
                self._pending.discard(decision)
                decision.cancel()
            if not isinstance(accepted, bool) or not isinstance(reason, str):
                raise TypeError("a write policy must return (bool, str)")
        except asyncio.CancelledError:
            if self._stopping:  # cancelled by stop(): answer, so the relay lets go of it
                return result.REJECT("relay shutting down")
            raise
        except Exception:
            logger.exception("test relay: write policy failed, rejecting")
            return result.REJECT("internal error")
        if accepted:
            return result.ACCEPT()
        return result.REJECT(_NIP01_PREFIX.sub("", reason, count=1))

    def release_all(self) -> None:
        """Stop admitting; every pending decision is cancelled and rejected."""
        self._stopping = True
        for task in list(self._pending):
            task.cancel()

    @property
    def pending(self) -> int:
        return len(self._pending)


class TcpProxy:
    """A byte-for-byte TCP forwarder on 127.0.0.1 whose connections a test can cut for sure.

    Why: ``LocalRelay.shutdown()`` can miss a connection handler (module docstring), which then
    keeps serving a client after a "restart" — the client never notices the outage. Behind
    this proxy a stop really ends every connection, like a crashed relay or a dead network.
    """

    def __init__(self, port: int | None = None) -> None:
        self.port = port
        self.target: int | None = None
        self._server: asyncio.Server | None = None
        self._links: set[asyncio.Task[None]] = set()

    async def open(self, target: int) -> None:
        """Accept on the (kept) public port and forward to `target`."""
        self.target = target
        if self._server is not None:
            return
        deadline = asyncio.get_running_loop().time() + _BIND_RETRY_SECONDS
        while True:
            try:
                self._server = await asyncio.start_server(self._link, "127.0.0.1", self.port or 0)
                break
            except OSError:
                if self.port is None or asyncio.get_running_loop().time() > deadline:
                    raise
                await asyncio.sleep(0.05)
        self.port = self._server.sockets[0].getsockname()[1]

    async def cut(self) -> None:
        """Stop accepting and drop every forwarded connection at once."""
        if self._server is not None:
            self._server.close()
            self._server = None
        links = list(self._links)
        for task in links:
            task.cancel()
        await asyncio.gather(*links, return_exceptions=True)

    async def _link(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._links.add(task)
        upstream_writer: asyncio.StreamWriter | None = None
        try:
            assert self.target is not None
            upstream_reader, upstream_writer = await asyncio.open_connection(
                "127.0.0.1", self.target
            )

            async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
                dst.close()

            await asyncio.gather(pump(reader, upstream_writer), pump(upstream_reader, writer))
        except (OSError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            # Only cut() cancels a link. asyncio's stream server asks a finished handler task
            # for its exception, which raises (and is logged at ERROR) for a cancelled one; so
            # a cut link ends normally.
            pass
        finally:
            for w in (writer, upstream_writer):
                if w is not None:
                    w.transport.abort()  # no FIN: the peer sees the connection die
            self._links.discard(task)


class LoopbackRelay:
    """A rust-nostr LocalRelay on 127.0.0.1 that a test can stop and restart on its port.

    Args:
        port: a fixed port; ``None`` lets the first start pick a free one, kept for restarts.
        policy: a :class:`WritePolicyHook` run on every event the relay would store/broadcast.
        policy_timeout: seconds before a pending policy decision is rejected; ``None`` = never.
        auth: require NIP-42 AUTH for ``"read"``, ``"write"`` or ``"both"``; ``None`` = open.
        lmdb_dir: keep events in an LMDB database there, across restarts.
        notes_per_minute / max_reqs: per-connection rate limits (defaults far above tests').
        proxied: serve through a :class:`TcpProxy` on the public port, so that :meth:`stop`
            ends every client connection for sure (use it for restart / outage tests; NIP-42
            AUTH does not work through it, as the relay checks its own URL in the AUTH event).
    """

    def __init__(
        self,
        *,
        port: int | None = None,
        policy: WritePolicyHook | None = None,
        policy_timeout: float | None = None,
        auth: str | None = None,
        lmdb_dir: Path | str | None = None,
        notes_per_minute: int = 100_000,
        max_reqs: int = 10_000,
        proxied: bool = False,
    ) -> None:
        modes = {
            "read": nostr_sdk.LocalRelayBuilderNip42Mode.READ,
            "write": nostr_sdk.LocalRelayBuilderNip42Mode.WRITE,
            "both": nostr_sdk.LocalRelayBuilderNip42Mode.BOTH,
        }
        if auth is not None and auth not in modes:
            raise ValueError(f"auth must be one of {sorted(modes)} or None")
        self._auth_mode = modes[auth] if auth is not None else None
        self.port = port
        self._policy = policy
        self._policy_timeout = policy_timeout
        self._lmdb_dir = Path(lmdb_dir) if lmdb_dir is not None else None
        self._database: Any = None
        self._rate_limit = nostr_sdk.RateLimit(max_reqs=max_reqs, notes_per_minute=notes_per_minute)
        self._relay: Any = None
        self._adapter: _PolicyAdapter | None = None
        self._proxy = TcpProxy(port) if proxied else None
        self._inner_port: int | None = None

    def __repr__(self) -> str:
        return f"<LoopbackRelay port={self.port} running={self.running}>"

    @property
    def url(self) -> str:
        """``ws://127.0.0.1:<port>`` (known once started)."""
        if self.port is None:
            raise RuntimeError("relay was never started")
        return f"ws://127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        return self._relay is not None

    async def start(self) -> None:
        """Start serving (on the same port as before, if it ran already)."""
        if self._relay is not None:
            return
        nostr_sdk.uniffi_set_event_loop(asyncio.get_running_loop())
        if self._lmdb_dir is not None and self._database is None:
            self._database = await nostr_sdk.NostrLmdb.open(str(self._lmdb_dir))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + _BIND_RETRY_SECONDS
        while True:
            relay = self._build()
            try:
                await relay.run()
                break
            except nostr_sdk.NostrSdkError as exc:
                if "in use" not in str(exc) or loop.time() > deadline:
                    raise
                await asyncio.sleep(0.05)
        url = str(await relay.url())
        self._inner_port = int(url.rsplit(":", 1)[1].rstrip("/"))
        self._relay = relay
        if self._proxy is None:
            self.port = self._inner_port
        else:
            await self._proxy.open(self._inner_port)
            self.port = self._proxy.port

    def _build(self) -> Any:
        builder = nostr_sdk.LocalRelayBuilder().addr("127.0.0.1").rate_limit(self._rate_limit)
        if self.port is not None and self._proxy is None:
            builder = builder.port(self.port)
        if self._database is not None:
            builder = builder.database(self._database)
        if self._auth_mode is not None:
            builder = builder.nip42(nostr_sdk.LocalRelayBuilderNip42(mode=self._auth_mode))
        self._adapter = None
        if self._policy is not None:
            self._adapter = _PolicyAdapter(self._policy, self._policy_timeout)
            builder = builder.write_policy(self._adapter)
        return builder.build()

    async def stop(self) -> None:
        """Stop serving: listener closed, clients dropped, pending policy calls rejected.

        Raises:
            RuntimeError: the port still accepts connections after ``_STOP_WAIT_SECONDS``.
        """
        relay, self._relay = self._relay, None
        if relay is None:
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + _STOP_WAIT_SECONDS
        try:
            if self._proxy is not None:
                await self._proxy.cut()
            assert self._inner_port is not None
            # LocalRelay's shutdown races (see the module docstring): the product's helper.
            if not await shutdown_local_relay(relay, "127.0.0.1", self._inner_port):
                raise RuntimeError(f"test relay on port {self._inner_port} still accepts")
        finally:
            adapter = self._adapter
            if adapter is not None:
                adapter.release_all()
                # Let released decisions reach the relay's threads while the loop still runs.
                while adapter.pending and loop.time() < deadline:
                    await asyncio.sleep(0.01)

    async def restart(self) -> None:
        """Stop, then start again on the same port."""
        await self.stop()
        await self.start()

    async def save_event(self, event_json: dict[str, Any]) -> None:
        """Write a (signed) event straight into the LMDB store, e.g. while the relay is down."""
        if self._database is None:
            raise RuntimeError("save_event needs lmdb_dir (and one start)")
        await self._database.save_event(nostr_sdk.Event.from_json(json.dumps(event_json)))

    async def __aenter__(self) -> LoopbackRelay:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.stop()


class ScriptedRelay:
    """A websocket server on 127.0.0.1 that sends what the test says and records the rest.

    ``on_message`` (optional) is called with ``(relay, connection, text)`` for each client
    frame, to answer automatically (e.g. EOSE after REQ). Frames are also queued in
    :attr:`received`.
    """

    def __init__(
        self,
        on_message: Callable[[ScriptedRelay, ServerConnection, str], Any] | None = None,
    ) -> None:
        self._on_message = on_message
        self._server: Server | None = None
        self.connections: list[ServerConnection] = []
        self.received: asyncio.Queue[str] = asyncio.Queue()
        self.connected = asyncio.Event()

    @property
    def url(self) -> str:
        if self._server is None:
            raise RuntimeError("scripted relay not started")
        port = self._server.sockets[0].getsockname()[1]
        return f"ws://127.0.0.1:{port}"

    async def _handler(self, connection: ServerConnection) -> None:
        self.connections.append(connection)
        self.connected.set()
        try:
            async for message in connection:
                text = message if isinstance(message, str) else message.decode()
                self.received.put_nowait(text)
                if self._on_message is not None:
                    outcome = self._on_message(self, connection, text)
                    if asyncio.iscoroutine(outcome):
                        await outcome
        finally:
            self.connections.remove(connection)

    async def send(self, frame: str | list[Any]) -> None:
        """Send a raw text frame (or a JSON-encoded list) to every connected client."""
        text = frame if isinstance(frame, str) else json.dumps(frame)
        for connection in list(self.connections):
            with contextlib.suppress(Exception):
                await connection.send(text)

    async def next_frame(self, kind: str | None = None, timeout: float = 5.0) -> list[Any]:
        """The next client frame (decoded), skipping ones of another ``kind``."""
        async with asyncio.timeout(timeout):
            while True:
                frame = json.loads(await self.received.get())
                if kind is None or frame[0] == kind:
                    return list(frame)

    async def start(self, max_size: int | None = 2**24) -> None:
        self._server = await serve(self._handler, "127.0.0.1", 0, max_size=max_size)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    async def __aenter__(self) -> ScriptedRelay:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.stop()
