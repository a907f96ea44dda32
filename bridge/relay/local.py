"""An in-process connection to the relay: text frames handed between two event loops, no socket.

Why. The daemon serves its embedded relay on a thread of its own (see
:mod:`bridge.runtime.edges.embedded_relay`). Reaching it like any phone does, over a loopback
websocket, would send every event through websocket framing (the client's masked), two socket
syscalls and the selector on both threads — a large share of the daemon's work on a restart
catch-up, for a hop that never leaves the process. A :class:`LocalLink` carries the same NIP-01
text frames through two in-memory queues instead, so both ends keep their protocol code
unchanged — the relay's :class:`~bridge.relay.session.ClientSession` and the daemon's
:class:`~bridge.nostr.relay_session.RelaySession` still parse every frame, and the relay still
checks, admits and stores every event it is given.

Theory of operation. A link is two :class:`FramePipe` objects, one per direction. A pipe's
writer may be on any thread; its reader awaits on the loop it was made for. ``put`` wakes the
reader only when the pipe goes from empty to non-empty (one ``call_soon_threadsafe`` per batch,
not per frame); the check and the wake-up flag are taken under one lock, so a wake-up is never
lost between the reader finding the pipe empty and starting to wait.

The daemon's end is a :class:`LocalChannel`, shaped like the part of a ``websockets`` client
connection that :class:`~bridge.nostr.relay.RelayConnection` uses (``send``, a cancel-safe
``recv``, ``close``, ``abort``, ``close_code``/``close_reason``); a closed link raises
``websockets``' own ``ConnectionClosed`` there, so the connection's reader ends and the pool
reconnects exactly as after a socket closed.

Flow control mirrors a socket's: the relay moves frames into the daemon's pipe only while less
than ``mark`` bytes of it are unread (:meth:`FramePipe.room` waits otherwise), so a stored answer
of thousands of events does not sit in memory at once; frames the daemon leaves unread past the
relay's ``max_pending_bytes`` get the link dropped, as a socket's peer that stopped reading is.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import threading
from collections.abc import Callable

from websockets.exceptions import ConnectionClosed, ConnectionClosedError, ConnectionClosedOK
from websockets.frames import Close, CloseCode

__all__ = [
    "FramePipe",
    "LocalChannel",
    "LocalLink",
]

_GOING_AWAY = Close(CloseCode.GOING_AWAY, "")


class FramePipe:
    """Frames in order from any thread to a reader on one event loop.

    Args:
        loop: the loop the reader awaits on (wake-ups are scheduled there).
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._lock = threading.Lock()
        self._frames: collections.deque[str] = collections.deque()
        self._ready = asyncio.Event()
        self._reader_waits = False
        self._closed: Close | None = None
        self._put_bytes = 0
        """Written by the writer only (under the lock)."""
        self._taken_bytes = 0
        """Written by the reader only (under the lock)."""
        self._room_waiter: tuple[asyncio.AbstractEventLoop, asyncio.Event, int] | None = None

    @property
    def unread_bytes(self) -> int:
        """Bytes put and not yet taken (a frame's length in characters, as the relay counts)."""
        return self._put_bytes - self._taken_bytes

    @property
    def closed(self) -> bool:
        return self._closed is not None

    @property
    def close_frame(self) -> Close | None:
        """Why the pipe was closed, once it was."""
        return self._closed

    def put(self, frames: list[str]) -> bool:
        """Queue `frames` for the reader; False (and nothing queued) once the pipe is closed."""
        wake = False
        with self._lock:
            if self._closed is not None:
                return False
            self._frames.extend(frames)
            self._put_bytes += sum(len(frame) for frame in frames)
            if self._reader_waits:
                self._reader_waits = False
                wake = True
        if wake:
            self._call(self._loop, self._ready.set)
        return True

    async def get(self) -> str:
        """The next frame. Cancel-safe: a frame is taken only when it is returned.

        Raises:
            ConnectionClosed: the pipe was closed and every frame before the close was taken.
        """
        while True:
            room: tuple[asyncio.AbstractEventLoop, asyncio.Event] | None = None
            with self._lock:
                if self._frames:
                    frame = self._frames.popleft()
                    self._taken_bytes += len(frame)
                    waiter = self._room_waiter
                    if waiter is not None and self.unread_bytes <= waiter[2]:
                        self._room_waiter = None
                        room = (waiter[0], waiter[1])
                else:
                    if self._closed is not None:
                        raise _closed_error(self._closed)
                    self._reader_waits = True
                    self._ready.clear()
                    frame = None
            if room is not None:
                self._call(room[0], room[1].set)
            if frame is not None:
                return frame
            await self._ready.wait()

    async def room(self, mark: int) -> None:
        """Wait (on the writer's loop) until at most `mark` bytes are unread, or the pipe closed."""
        loop = asyncio.get_running_loop()
        while True:
            event = asyncio.Event()
            with self._lock:
                if self.unread_bytes <= mark or self._closed is not None:
                    return
                self._room_waiter = (loop, event, mark)
            await event.wait()

    def close(self, frame: Close) -> None:
        """Close (idempotent): the reader takes what is queued, then gets ``ConnectionClosed``."""
        with self._lock:
            if self._closed is not None:
                return
            self._closed = frame
            wake, self._reader_waits = self._reader_waits, False
            waiter, self._room_waiter = self._room_waiter, None
        if wake:
            self._call(self._loop, self._ready.set)
        if waiter is not None:
            self._call(waiter[0], waiter[1].set)

    @staticmethod
    def _call(loop: asyncio.AbstractEventLoop, callback: Callable[[], object]) -> None:
        with contextlib.suppress(RuntimeError):  # that loop is closed: nobody is waiting
            loop.call_soon_threadsafe(callback)


def _closed_error(frame: Close) -> ConnectionClosed:
    if frame.code == CloseCode.NORMAL_CLOSURE:
        return ConnectionClosedOK(frame, None)
    return ConnectionClosedError(frame, None)


class LocalLink:
    """Both directions of one in-process connection.

    Args:
        relay_loop: the loop the relay reads the client's frames on.
        client_loop: the loop the client (the daemon's relay connection) reads on.
        answer_cap: the most stored events the relay sends for one ``REQ``, when every answer
            below it is complete (see :attr:`LocalChannel.answer_cap`).
    """

    def __init__(
        self,
        relay_loop: asyncio.AbstractEventLoop,
        client_loop: asyncio.AbstractEventLoop,
        *,
        answer_cap: int | None = None,
    ) -> None:
        self.to_relay = FramePipe(relay_loop)
        self.to_client = FramePipe(client_loop)
        self.channel = LocalChannel(self, answer_cap=answer_cap)

    @property
    def closed(self) -> bool:
        return self.to_relay.closed or self.to_client.closed

    def close(self, frame: Close) -> None:
        """End both directions (idempotent); each reader takes what was queued first."""
        self.to_relay.close(frame)
        self.to_client.close(frame)


class LocalChannel:
    """The client's end of a :class:`LocalLink`, as :class:`~bridge.nostr.relay.RelayConnection`
    uses a ``websockets`` connection."""

    def __init__(self, link: LocalLink, *, answer_cap: int | None = None) -> None:
        self._link = link
        self.close_code: int | None = None
        self.close_reason = ""
        self.answer_cap = answer_cap
        """The relay's cap on one stored answer, when it answers every ``REQ`` completely up to
        it (ours does: newest first, every match up to ``max_limit``). A client can then take an
        answer below it as whole instead of paging through it to rule out holes, which a relay
        met over a socket cannot promise (see :mod:`bridge.nostr.backlog`)."""

    async def send(self, text: str) -> None:
        """Queue a frame for the relay. Raises ``ConnectionClosed`` once the link is closed."""
        if not self._link.to_relay.put([text]):
            raise self._ended()

    async def recv(self) -> str:
        """The relay's next frame (cancel-safe). Raises ``ConnectionClosed`` at the end."""
        try:
            return await self._link.to_client.get()
        except ConnectionClosed as exc:
            self._note(exc.rcvd)
            raise

    async def close(self) -> None:
        """Close normally (idempotent)."""
        self._link.close(Close(CloseCode.NORMAL_CLOSURE, ""))
        self._note(Close(CloseCode.NORMAL_CLOSURE, ""))

    def abort(self) -> None:
        """Drop the link at once (idempotent)."""
        self._link.close(Close(CloseCode.ABNORMAL_CLOSURE, "aborted"))
        self._note(Close(CloseCode.ABNORMAL_CLOSURE, "aborted"))

    def _ended(self) -> ConnectionClosed:
        frame = self._link.to_relay.close_frame or _GOING_AWAY
        self._note(frame)
        return _closed_error(frame)

    def _note(self, frame: Close | None) -> None:
        if frame is not None and self.close_code is None:
            self.close_code = int(frame.code)
            self.close_reason = frame.reason
