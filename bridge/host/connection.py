"""One daemon's connection to a session host: the handshake, the sender, the reader.

:class:`DaemonConnection` is the host's side of the protocol of :mod:`bridge.host.wire`:

- **handshake** — ``hello`` within :data:`HANDSHAKE_TIMEOUT` s, answered with ``welcome`` (or
  ``problem`` for another protocol version);
- **sender** — reads what it sends *from the journal* (:meth:`HostSide.records_after`), so the
  replay after a reconnect and the live stream are one path; once it reached the journal's end it
  re-presents the asks still parked, then says ``synced``; messages that are not records
  (checks, replies) go out before the next records;
- **reader** — hands every message but ``hello`` to the host (:meth:`HostSide.on_message`).

Either side breaking ends the connection quietly (the daemon died, or will reconnect); the host
keeps its journal and its parked calls for the next one. Only our own uid (or root) may connect.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Final, Protocol, TypeGuard

from bridge.host.events import HostEvent, PermissionAsked
from bridge.host.wire import (
    WIRE_VERSION,
    Ack,
    Answer,
    AskReceived,
    Close,
    DaemonMessage,
    EventRecord,
    Hello,
    HostMessage,
    Interrupt,
    LineBuffer,
    PermissionPending,
    Problem,
    SendInput,
    SetOption,
    Settings,
    Synced,
    ToolCheck,
    Verdict,
    Welcome,
    WireError,
    decode,
    encode,
)
from bridge.tasks import TaskSet, race

__all__ = ["HANDSHAKE_TIMEOUT", "DaemonConnection", "HostSide"]

logger = logging.getLogger(__name__)

HANDSHAKE_TIMEOUT: Final = 10.0
"""Seconds a connection may take to say ``hello``."""
_READ_SIZE: Final = 65536


class HostSide(Protocol):
    """What a connection needs of its host (:class:`~bridge.host.server.SessionHost`)."""

    @property
    def sid(self) -> str: ...

    @property
    def journal_floor(self) -> int: ...

    def welcome(self) -> Welcome: ...

    def records_after(self, seq: int) -> list[tuple[int, HostEvent]]: ...

    def parked(self) -> tuple[list[PermissionAsked], list[ToolCheck]]: ...

    async def journal_beyond(self, seq: int) -> None: ...

    def on_message(self, message: DaemonMessage, link: DaemonConnection) -> None: ...


class DaemonConnection:
    """One daemon connection (see the module docstring)."""

    def __init__(
        self, host: HostSide, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self._host = host
        self._reader = reader
        self._writer = writer
        self._lines = LineBuffer()
        self._pending_lines: list[bytes] = []
        self._sent = 0
        self._sent_changed = asyncio.Event()
        self._queue: list[HostMessage] = []
        self._queued = asyncio.Event()
        self._tasks = TaskSet(f"host {host.sid} link", logger=logger)
        self._closed = False

    async def handshake(self) -> Hello | None:
        """Read ``hello`` and answer ``welcome``; None when the daemon speaks another version."""
        async with asyncio.timeout(HANDSHAKE_TIMEOUT):
            message = await self._next_message()
        if message is None:
            raise ConnectionError("closed before hello")
        if not isinstance(message, Hello):
            self._write(Problem("the first message must be hello"))
            return None
        if message.version != WIRE_VERSION:
            self._write(
                Problem(f"this session host speaks version {WIRE_VERSION}, not {message.version}")
            )
            return None
        self._write(self._host.welcome())
        return message

    async def serve(self, after: int) -> None:
        """Until the daemon goes away or the link is replaced."""
        floor = self._host.journal_floor
        if after < floor:
            self._write(
                Problem(f"records {after + 1}..{floor} were trimmed before this daemon got them")
            )
            after = floor
        self._sent = after
        self._tasks.spawn(self._send(), "send")
        reading = self._tasks.spawn(self._read(), "read")
        if reading is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await reading
        await self._tasks.close()

    def send(self, message: HostMessage) -> None:
        """Queue a message that is not a journal record (sent before the next records)."""
        if not self._closed:
            self._queue.append(message)
            self._queued.set()

    async def caught_up(self, seq: int) -> None:
        """Wait until every record up to `seq` was written to the socket."""
        while self._sent < seq and not self._closed:
            self._sent_changed.clear()
            await self._sent_changed.wait()

    async def drained(self) -> None:
        """Wait until the queued messages are written and the socket's buffer is flushed."""
        self._flush_queue()
        await self._writer.drain()

    async def close(self) -> None:
        self._closed = True
        await self._tasks.close()
        self._writer.close()
        with contextlib.suppress(OSError, ConnectionError):
            await self._writer.wait_closed()

    async def _send(self) -> None:
        try:
            await self._send_forever()
        except (ConnectionError, OSError) as exc:
            logger.info(
                "host %s: the daemon's connection broke while sending: %s", self._host.sid, exc
            )
            self._reader.feed_eof()

    async def _send_forever(self) -> None:
        host = self._host
        _, checks = host.parked()
        for check in checks:
            self._queue.append(check)
        presented = False
        while True:
            self._flush_queue()
            records = host.records_after(self._sent)
            for seq, event in records:
                self._write(EventRecord(seq, event))
                self._sent = seq
            if records:
                self._sent_changed.set()
                await self._writer.drain()
                continue
            if not presented:
                # The replay reached the journal's end: every parked ask was sent as an event
                # before now, so re-presenting it cannot overtake it.
                presented = True
                asks, _ = host.parked()
                for request in asks:
                    self._write(PermissionPending(request))
                self._write(Synced(self._sent))
            await self._writer.drain()
            await race(host.journal_beyond(self._sent), self._queued.wait())
            self._queued.clear()

    def _flush_queue(self) -> None:
        queue, self._queue = self._queue, []
        for message in queue:
            self._write(message)

    async def _read(self) -> None:
        while True:
            try:
                message = await self._next_message()
            except (ConnectionError, OSError) as exc:
                logger.info("host %s: the daemon's connection broke: %s", self._host.sid, exc)
                return
            if message is None:
                return
            if not _from_daemon(message):
                self._write(Problem(f"unexpected message {type(message).__name__}"))
                continue
            self._host.on_message(message, self)
            self._flush_queue()

    async def _next_message(self) -> DaemonMessage | HostMessage | None:
        while True:
            if self._pending_lines:
                line = self._pending_lines.pop(0)
                try:
                    return decode(line)
                except WireError as exc:
                    self._write(Problem(f"bad message: {exc}"))
                    continue
            data = await self._reader.read(_READ_SIZE)
            if not data:
                return None
            self._pending_lines.extend(self._lines.feed(data))

    def _write(self, message: HostMessage) -> None:
        if not self._writer.is_closing():
            self._writer.write(encode(message))


def _from_daemon(message: DaemonMessage | HostMessage) -> TypeGuard[DaemonMessage]:
    return isinstance(
        message,
        (
            Hello,
            SendInput,
            AskReceived,
            Interrupt,
            SetOption,
            Answer,
            Verdict,
            Ack,
            Settings,
            Close,
        ),
    )
