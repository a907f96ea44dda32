"""The Claude Code CLI's stream-json control protocol, client side: JSON lines both ways.

What the CLI speaks (mirrored from ``claude-agent-sdk`` 0.2.189, ``_internal/query.py``):

- **Our control requests** (``initialize``, ``get_settings``, ``interrupt``,
  ``set_permission_mode``, ``set_model``, ``apply_flag_settings``):
  ``{"type":"control_request","request_id":"req_<n>_<hex>","request":{"subtype":…}}``, answered by
  ``{"type":"control_response","response":{"subtype":"success"|"error","request_id":…,
  "response":{…}|"error":"…"}}``. :meth:`ControlProtocol.request` correlates them by id, with a
  timeout at the call site; an error answer raises :class:`ControlError` with the CLI's message.
- **The CLI's control requests** (``can_use_tool``, ``hook_callback``, …) are dispatched by
  subtype to the handlers given at construction, each in its own task (so one waiting for the
  phone never holds up another or the reader); the handler's dict is sent back as the success
  response, an exception as an error response (its message), and an unknown subtype gets an
  error response at once. A handler may wait without limit: nothing here times it out. A handler
  that fails with anything but :class:`ControlError` is *not* answered (an error answer to a
  permission prompt is a refusal the user never gave): ``on_failure`` is told, and the driver
  ends the session.
- ``{"type":"control_cancel_request","request_id":…}``: the CLI abandoned one of its requests (an
  interrupt while a prompt waits). Its handler task is cancelled and **no response is written**.
- Everything else is a message of the conversation (``system``, ``assistant``, ``user``,
  ``result``, …) and goes to ``on_frame``, in order, from the reader's task. ``system``
  ``session_state_changed`` frames marked ``sdk_host_only`` (asked for with
  ``CLAUDE_CODE_SDK_READS_SESSION_STATE``, as the SDK does) are dropped, as the SDK drops them.

Lines that are not JSON objects (a CLI build may print diagnostics on stdout) are skipped; so is a
line longer than the reader's limit (logged: one bad frame must not end the session). When the
CLI's stdout ends, :meth:`ControlProtocol.read` returns; :meth:`ControlProtocol.close` then fails
our pending requests with :class:`ProtocolClosed` and cancels the handlers still running (the
CLI that asked is gone).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

import orjson

from bridge.tasks import TaskSet

__all__ = [
    "ControlError",
    "ControlProtocol",
    "ControlTimeout",
    "Handler",
    "LineWriter",
    "ProtocolClosed",
]

logger = logging.getLogger(__name__)


class ControlError(Exception):
    """The CLI answered a control request with an error; the text is the CLI's message."""


class ControlTimeout(ControlError):
    """The CLI did not answer a control request in time."""


class ProtocolClosed(ControlError):
    """The CLI's output ended (or the protocol was closed) before it answered."""


class LineWriter(Protocol):
    """Our end of the CLI's stdin (:class:`~bridge.agents.claude.cli_process.PipeWriter`)."""

    def write(self, data: bytes) -> None: ...

    async def drain(self) -> None: ...


Handler = Callable[[str, Mapping[str, Any]], Awaitable[dict[str, Any]]]
"""``(the CLI's request id, the request) → the response`` of one kind of CLI control request."""


class ControlProtocol:
    """The control protocol over one CLI's stdin and stdout (see the module docstring).

    Args:
        writer: the CLI's stdin.
        handlers: the CLI's control requests we serve, by subtype.
        on_frame: called with every other frame, in order; what it raises ends :meth:`read`.
        on_failure: called when a handler raised something other than :class:`ControlError`
            (``(subtype, exception)``); that request is left unanswered.
        on_cancel: called with the CLI's request id when the CLI cancels one of its requests,
            at once (the handler's task only sees its cancellation on a later loop turn, after
            frames the CLI sent next, such as the interrupted turn's ``result``).
        label: a short name for logs.
    """

    def __init__(
        self,
        writer: LineWriter,
        handlers: Mapping[str, Handler],
        on_frame: Callable[[dict[str, Any]], None],
        on_failure: Callable[[str, Exception], None],
        *,
        on_cancel: Callable[[str], None] | None = None,
        label: str,
    ) -> None:
        self._writer = writer
        self._handlers = dict(handlers)
        self._on_frame = on_frame
        self._on_failure = on_failure
        self._on_cancel = on_cancel
        self._label = label
        self._counter = itertools.count(1)
        self._pending: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._inflight: dict[str, asyncio.Task[None]] = {}
        self._tasks = TaskSet(f"Claude Code requests {label}", logger=logger)
        self._closed = False

    @property
    def handling(self) -> int:
        """How many of the CLI's requests are being handled now."""
        return len(self._inflight)

    # -- writing ---------------------------------------------------------------------------------

    async def send(self, message: Mapping[str, Any]) -> None:
        """Write one JSON line (cancel-safe: once called, the line is queued whole).

        Raises:
            ProtocolClosed: the protocol is closed or the CLI's stdin broke.
        """
        if self._closed:
            raise ProtocolClosed("the Claude Code process is gone")
        try:
            self._writer.write(orjson.dumps(message) + b"\n")
            await self._writer.drain()
        except (BrokenPipeError, ConnectionError) as exc:
            raise ProtocolClosed("the Claude Code process's input is closed") from exc

    async def request(self, request: Mapping[str, Any], timeout: float) -> dict[str, Any]:
        """Send one control request and wait for its answer.

        Cancel-safe: a cancelled caller leaves nothing pending (the CLI's late answer is dropped).

        Raises:
            ControlError: the CLI answered with an error (its message).
            ControlTimeout: no answer within `timeout` seconds.
            ProtocolClosed: the CLI went away first.
        """
        request_id = f"req_{next(self._counter)}_{os.urandom(4).hex()}"
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        subtype = request.get("subtype")
        try:
            logger.debug("> %s control request %s (%s)", self._label, subtype, request_id)
            await self.send(
                {"type": "control_request", "request_id": request_id, "request": dict(request)}
            )
            async with asyncio.timeout(timeout):
                return await future
        except TimeoutError:
            logger.info("- %s: no answer to %s in %.0f s", self._label, subtype, timeout)
            raise ControlTimeout(f"Claude Code did not answer {subtype} in time") from None
        finally:
            self._pending.pop(request_id, None)

    # -- reading ---------------------------------------------------------------------------------

    async def read(self, reader: asyncio.StreamReader) -> None:
        """Read and dispatch frames until the CLI's stdout ends (cancel-safe)."""
        while True:
            line = await _read_line(reader, self._label)
            if line is None:
                return
            self.feed(line)

    def feed(self, line: bytes) -> None:
        """Dispatch one line of the CLI's stdout (see the module docstring)."""
        stripped = line.strip()
        if not stripped.startswith(b"{"):
            if stripped:
                logger.debug("< %s: a line that is not JSON (%d bytes)", self._label, len(line))
            return
        try:
            frame = orjson.loads(stripped)
        except orjson.JSONDecodeError:
            logger.warning(
                "! %s: a stdout line is not valid JSON (%d bytes)", self._label, len(line)
            )
            return
        if not isinstance(frame, dict):
            return
        kind = frame.get("type")
        if kind == "control_response":
            self._answer(frame.get("response"))
        elif kind == "control_request":
            self._dispatch(frame)
        elif kind == "control_cancel_request":
            self._cancel(frame.get("request_id"))
        elif (
            kind == "system"
            and frame.get("subtype") == "session_state_changed"
            and frame.get("sdk_host_only") is True
        ):
            return
        else:
            self._on_frame(frame)

    def _answer(self, response: object) -> None:
        if not isinstance(response, dict):
            return
        request_id = response.get("request_id")
        future = self._pending.get(request_id) if isinstance(request_id, str) else None
        if future is None or future.done():
            logger.debug("< %s: an answer nobody waits for", self._label)
            return
        if response.get("subtype") == "error":
            future.set_exception(ControlError(str(response.get("error") or "unknown error")))
        else:
            body = response.get("response")
            future.set_result(body if isinstance(body, dict) else {})

    def _dispatch(self, frame: Mapping[str, Any]) -> None:
        request_id = frame.get("request_id")
        request = frame.get("request")
        if not isinstance(request_id, str) or not isinstance(request, dict):
            logger.warning("! %s: a malformed control request", self._label)
            return
        subtype = str(request.get("subtype"))
        logger.debug("< %s control request %s (%s)", self._label, subtype, request_id[:12])
        handler = self._handlers.get(subtype)
        if self._closed:
            return
        task = self._tasks.spawn(
            self._handle(handler, subtype, request_id, request), f"claude-{subtype}"
        )
        if task is not None:
            self._inflight[request_id] = task
            task.add_done_callback(lambda _: self._inflight.pop(request_id, None))

    async def _handle(
        self, handler: Handler | None, subtype: str, request_id: str, request: dict[str, Any]
    ) -> None:
        """Run one handler and answer; cancelled = the CLI abandoned the request: no answer."""
        try:
            if handler is None:
                raise ControlError(f"Unsupported control request subtype: {subtype}")
            body = await handler(request_id, request)
        except asyncio.CancelledError:
            logger.debug("x %s: %s %s withdrawn", self._label, subtype, request_id[:12])
            raise
        except ControlError as exc:
            answer: dict[str, Any] = {
                "subtype": "error",
                "request_id": request_id,
                "error": str(exc) or type(exc).__name__,
            }
        except Exception as exc:
            # Not an answer: a bug, or the host could not journal. Answering with an error would
            # make the CLI record a refusal nobody gave; the session ends instead.
            logger.error("x %s: the %s handler failed", self._label, subtype, exc_info=exc)
            self._on_failure(subtype, exc)
            return
        else:
            answer = {"subtype": "success", "request_id": request_id, "response": body}
        try:
            await self.send({"type": "control_response", "response": answer})
        except ProtocolClosed:
            logger.debug("x %s: %s answered after the CLI went away", self._label, subtype)

    def _cancel(self, request_id: object) -> None:
        task = self._inflight.pop(request_id, None) if isinstance(request_id, str) else None
        if task is not None:
            logger.debug("< %s: the CLI cancelled %s", self._label, str(request_id)[:12])
            task.cancel()
            if self._on_cancel is not None:
                assert isinstance(request_id, str)
                self._on_cancel(request_id)

    # -- the end ---------------------------------------------------------------------------------

    async def cancel_handlers(self) -> int:
        """Cancel every handler still running and wait for them (nothing is answered); how many."""
        tasks = list(self._inflight.values())
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)
        return len(tasks)

    async def close(self) -> None:
        """Fail our pending requests, cancel the CLI's (idempotent; the CLI is gone)."""
        self._closed = True
        for future in self._pending.values():
            if not future.done():
                future.set_exception(ProtocolClosed("the Claude Code process is gone"))
        await self._tasks.close()


async def _read_line(reader: asyncio.StreamReader, label: str) -> bytes | None:
    """The next line (None at the end; a torn last line is returned as it is).

    A line longer than the reader's limit is skipped, logged.
    """
    while True:
        try:
            return await reader.readuntil(b"\n")
        except asyncio.IncompleteReadError as exc:
            return exc.partial or None
        except asyncio.LimitOverrunError as exc:
            consumed = exc.consumed  # never 0: the limit was passed
        logger.warning("! %s: skipping a stdout line over the length limit", label)
        while True:
            await reader.readexactly(consumed)
            try:
                await reader.readuntil(b"\n")
                break
            except asyncio.LimitOverrunError as again:
                consumed = again.consumed
            except asyncio.IncompleteReadError:
                return None
