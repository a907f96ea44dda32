"""The daemon's end of one session host's socket (see :mod:`bridge.host.wire` for the protocol).

:class:`HostLink` connects, says ``hello``, and then splits what the host sends in two:

- **the stream** — journal records, parked asks re-presented, pre-tool checks — in the order the
  host sent them, read one at a time with :meth:`HostLink.next` by the session's runner, which
  feeds them to the engine in that order;
- **replies** — ``received`` and ``answer_done`` — which resolve the future of the call that
  asked (:meth:`HostLink.received`, :meth:`HostLink.answer`).

A reader task (owned by the link) does the splitting; :meth:`HostLink.next` returns None once
the host closed the connection (the host ended, or died), after everything it sent before.
``problem`` lines are logged: a host refuses a bad message that way and goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections import deque
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Final

from bridge.host.driver import PermissionAnswer
from bridge.host.wire import (
    Answer,
    AnswerDone,
    AskReceived,
    Closed,
    DaemonMessage,
    EventRecord,
    Hello,
    HostMessage,
    LineBuffer,
    PermissionPending,
    Problem,
    Received,
    Synced,
    ToolCheck,
    Welcome,
    WireError,
    decode,
    encode,
)
from bridge.tasks import TaskSet

__all__ = ["CONNECT_TIMEOUT", "HostLink", "HostLinkError", "StreamItem"]

logger = logging.getLogger(__name__)

CONNECT_TIMEOUT: Final = 5.0
"""Seconds to connect and get ``welcome``."""
REPLY_TIMEOUT: Final = 30.0
"""Seconds a host may take to answer ``ask_received`` or ``answer``."""
_READ_SIZE: Final = 65536

StreamItem = EventRecord | PermissionPending | Synced | ToolCheck
"""What the runner reads from :meth:`HostLink.next`, in the host's order."""


class HostLinkError(Exception):
    """The host cannot be reached or refused us; the text says why."""


class HostLink:
    """One connection to a session host (build it with :meth:`connect`)."""

    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, label: str
    ) -> None:
        self._reader = reader
        self._writer = writer
        self._label = label
        self._lines = LineBuffer()
        self._pending: deque[bytes] = deque()
        self._stream: deque[StreamItem] = deque()
        self._stream_ready = asyncio.Event()
        self._eof = False
        self._received: dict[int, asyncio.Future[tuple[str, ...]]] = {}
        self._answers: dict[str, asyncio.Future[bool]] = {}
        self._requests = itertools.count(1)
        self._tasks = TaskSet(f"host link {label}", logger=logger)
        self._on_answer_done: Callable[[str], None] | None = None
        self.closed_by_host = False
        """The host said ``closed`` (it ended the session on our ``close``)."""
        self.welcome: Welcome | None = None

    @classmethod
    async def connect(
        cls,
        socket_path: Path,
        hello: Hello,
        label: str,
        timeout: float = CONNECT_TIMEOUT,
        on_answer_done: Callable[[str], None] | None = None,
    ) -> HostLink | None:
        """Connect and shake hands; None when nothing listens on `socket_path`.

        `on_answer_done` is told the request id of every ``answer_done`` nobody here waits for:
        those of the answers ``hello`` carried (the host has them; the store may forget them).

        Raises:
            HostLinkError: something listens but the handshake failed (a host of another
                version, a hung host, garbage).
        """
        try:
            async with asyncio.timeout(timeout):
                reader, writer = await asyncio.open_unix_connection(str(socket_path))
        except (FileNotFoundError, ConnectionRefusedError):
            return None
        except (TimeoutError, OSError) as exc:
            raise HostLinkError(f"the session host's socket does not answer: {exc}") from None
        link = cls(reader, writer, label)
        link._on_answer_done = on_answer_done
        try:
            link.send(hello)
            async with asyncio.timeout(timeout):
                first = await link._read_one()
        except (TimeoutError, OSError, WireError) as exc:
            await link.close()
            raise HostLinkError(f"the session host did not say welcome: {exc}") from None
        if isinstance(first, Problem):
            await link.close()
            raise HostLinkError(f"the session host refused the connection: {first.message}")
        if not isinstance(first, Welcome):
            await link.close()
            raise HostLinkError(f"the session host answered {type(first).__name__}, not welcome")
        link.welcome = first
        link._tasks.spawn(link._read_forever(), "read")
        return link

    # --- sending ---------------------------------------------------------------------------------

    def send(self, message: DaemonMessage) -> None:
        """Write one message (no await: the socket buffers; a dead host just drops it)."""
        if not self._writer.is_closing():
            self._writer.write(encode(message))

    async def received(self, uids: Collection[str]) -> set[str]:
        """Which of `uids` the agent took or recorded.

        Raises:
            HostLinkError: the host went away or did not answer in time.
        """
        req = next(self._requests)
        future: asyncio.Future[tuple[str, ...]] = asyncio.get_running_loop().create_future()
        self._received[req] = future
        self.send(AskReceived(req, tuple(uids)))
        try:
            async with asyncio.timeout(REPLY_TIMEOUT):
                return set(await future)
        except TimeoutError:
            raise HostLinkError("the session host did not say which inputs it got") from None
        finally:
            self._received.pop(req, None)

    async def answer(self, request_id: str, answer: PermissionAnswer) -> bool:
        """Deliver an answer; whether it was applied (False: unknown or answered already).

        Raises:
            HostLinkError: the host went away or did not confirm in time.
        """
        future = self._answers.get(request_id)
        if future is None or future.done():
            future = asyncio.get_running_loop().create_future()
            self._answers[request_id] = future
        self.send(Answer(request_id, answer))
        try:
            async with asyncio.timeout(REPLY_TIMEOUT):
                return await future
        except TimeoutError:
            raise HostLinkError("the session host did not confirm the answer") from None
        finally:
            self._answers.pop(request_id, None)

    # --- receiving -------------------------------------------------------------------------------

    async def next(self) -> StreamItem | None:
        """The next item of the stream, or None once the host closed the connection."""
        while not self._stream:
            if self._eof:
                return None
            self._stream_ready.clear()
            await self._stream_ready.wait()
        return self._stream.popleft()

    async def close(self) -> None:
        """Close our end (the host keeps running unless it was told ``close``)."""
        await self._tasks.close()
        self._writer.close()
        with contextlib.suppress(OSError, ConnectionError):
            await self._writer.wait_closed()
        self._end()

    async def _read_one(self) -> DaemonMessage | HostMessage | None:
        while True:
            if self._pending:
                return decode(self._pending.popleft())
            data = await self._reader.read(_READ_SIZE)
            if not data:
                return None
            self._pending.extend(self._lines.feed(data))

    async def _read_forever(self) -> None:
        try:
            while True:
                try:
                    message = await self._read_one()
                except WireError as exc:
                    logger.error("x session host %s sent a bad line: %s", self._label, exc)
                    continue
                if message is None:
                    return
                self._dispatch(message)
        except (ConnectionError, OSError) as exc:
            logger.info("session host %s: the connection broke: %s", self._label, exc)
        finally:
            self._end()

    def _dispatch(self, message: DaemonMessage | HostMessage) -> None:
        if isinstance(message, EventRecord | PermissionPending | Synced | ToolCheck):
            self._stream.append(message)
            self._stream_ready.set()
        elif isinstance(message, Received):
            future = self._received.get(message.req)
            if future is not None and not future.done():
                future.set_result(message.uids)
        elif isinstance(message, AnswerDone):
            answered = self._answers.get(message.request_id)
            if answered is not None and not answered.done():
                answered.set_result(message.applied)
            elif self._on_answer_done is not None:
                self._on_answer_done(message.request_id)
        elif isinstance(message, Closed):
            self.closed_by_host = True
        elif isinstance(message, Problem):
            logger.warning("! session host %s: %s", self._label, message.message)
            if message.message.startswith("received:"):
                for future in self._received.values():
                    if not future.done():
                        future.set_exception(HostLinkError(message.message))
        else:
            logger.error("x session host %s sent %s", self._label, type(message).__name__)

    def _end(self) -> None:
        if self._eof:
            return
        self._eof = True
        self._stream_ready.set()
        futures: list[asyncio.Future[tuple[str, ...]] | asyncio.Future[bool]] = [
            *self._received.values(),
            *self._answers.values(),
        ]
        for future in futures:
            if not future.done():
                future.set_exception(HostLinkError("the session host went away"))
