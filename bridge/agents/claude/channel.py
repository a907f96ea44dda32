"""Operations on the SDK client asked for by the daemon's tasks, performed by the session task.

The SDK wants its client used from the context that connected it, and a runner's methods are
called from the daemon's tasks. :class:`ControlChannel` bridges the two: :meth:`~ControlChannel.call`
queues an operation (``interrupt``, ``set_model``, a raw control request, …) with a future and
waits for it; the session task runs :meth:`~ControlChannel.serve` next to its reader and writer,
and performs each operation as its own task (owned by a :class:`~bridge.tasks.TaskSet` for the
connection), so that a slow one (``set_model`` probes the API for an unknown model) never holds
up an interrupt. Operations still queued when the CLI restarts wait for the next connection;
when the session ends they fail with :class:`RunnerError`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, cast

from claude_agent_sdk import ClaudeSDKClient

from bridge.tasks import TaskSet

from ..base import RunnerError

__all__ = ["ControlChannel", "Operation", "control_request"]

T = TypeVar("T")
Operation = Callable[[ClaudeSDKClient], Awaitable[Any]]


class ControlChannel:
    """A queue of client operations and the futures their callers await."""

    def __init__(self) -> None:
        self._queue: asyncio.Queue[tuple[Operation, asyncio.Future[Any]]] = asyncio.Queue()

    async def call(self, op: Callable[[ClaudeSDKClient], Awaitable[T]], timeout: float) -> T:
        """Have the session task run `op`; its result or exception.

        Raises:
            RunnerError: no answer within `timeout` seconds, or the session ended first.
        """
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._queue.put_nowait((op, future))
        try:
            async with asyncio.timeout(timeout):
                return cast(T, await future)
        except TimeoutError:
            raise RunnerError("Claude Code did not answer in time") from None

    async def serve(self, client: ClaudeSDKClient) -> None:
        """Run queued operations on `client` until cancelled (then cancel and await those in
        flight: their callers get :class:`RunnerError`)."""
        running = TaskSet("Claude control operations")
        try:
            while True:
                op, future = await self._queue.get()
                if future.done():  # its caller gave up
                    continue
                running.spawn(_perform(client, op, future), "claude-control")
        finally:
            await running.close()

    def fail_pending(self, message: str) -> None:
        """Fail every operation still queued (the session is over)."""
        while not self._queue.empty():
            _, future = self._queue.get_nowait()
            if not future.done():
                future.set_exception(RunnerError(message))


async def _perform(client: ClaudeSDKClient, op: Operation, future: asyncio.Future[Any]) -> None:
    try:
        result = await op(client)
    except asyncio.CancelledError:
        if not future.done():
            future.set_exception(RunnerError("Claude Code restarted before answering"))
        raise
    except Exception as exc:
        if not future.done():
            future.set_exception(exc)
    else:
        if not future.done():
            future.set_result(result)


async def control_request(client: ClaudeSDKClient, request: dict[str, Any]) -> dict[str, Any]:
    """A control request the SDK has no method for (``get_settings``, ``apply_flag_settings``).

    Uses the SDK's private ``Query._send_control_request`` (present in the pinned 0.2.189).

    Raises:
        RunnerError: this SDK has no such method.
        Exception: the CLI answered with an error (its message).
    """
    send = getattr(getattr(client, "_query", None), "_send_control_request", None)
    if send is None:
        raise RunnerError("this claude-agent-sdk cannot send Claude Code control requests")
    result = await send(request)
    return result if isinstance(result, dict) else {}
