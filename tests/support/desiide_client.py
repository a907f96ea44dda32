"""``codedeck-bridge desiide`` forked the way the Desiide extension forks it, and a JSON-RPC client.

The process runs as a user's editor runs it (``python -m bridge desiide --home … --log-dir …``),
with stdin/stdout as pipes carrying ``Content-Length`` frames. The client:

- sends requests and returns their results (:meth:`DesiideClient.request`), raising
  :class:`RpcFailure` with the code and message of an error answer;
- keeps every notification in order (``task.event`` in :attr:`events`, ``log`` in :attr:`logs`)
  and lets a test wait for one (:meth:`wait_event`);
- answers the orchestrator's ``secrets.get`` from :attr:`secrets` (a missing name is ``null``),
  recording each ref asked for;
- checks that stdout never carries anything but frames (a stray byte fails the read).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from bridge.control.framing import FrameDecoder, encode_frame

__all__ = ["DesiideClient", "RpcFailure"]

REPO = Path(__file__).resolve().parents[2]


class RpcFailure(Exception):
    """An error answer: ``code`` and ``message`` as the orchestrator sent them."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.data = data


class DesiideClient:
    """One forked orchestrator (see the module docstring)."""

    def __init__(
        self,
        home: Path,
        *,
        log_dir: Path | None = None,
        env: Mapping[str, str] | None = None,
        secrets: Mapping[str, str | None] | None = None,
    ) -> None:
        self.home = home
        self.log_dir = log_dir or home.parent / "desiide-logs"
        self.env = dict(env or {})
        self.secrets: dict[str, str | None] = dict(secrets or {})
        self.secret_asks: list[str] = []
        self.events: list[dict[str, Any]] = []
        self.logs: list[dict[str, Any]] = []
        self.raw: list[dict[str, Any]] = []
        self.proc: asyncio.subprocess.Process | None = None
        self._decoder = FrameDecoder(max_body=1 << 24)
        self._next_id = 1
        self._waiting: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._changed = asyncio.Event()
        self._reader: asyncio.Task[None] | None = None
        self.stderr_path = home.parent / "desiide-stderr.log"

    async def start(self) -> None:
        env = dict(os.environ)
        env.update(self.env)
        env["PYTHONPATH"] = str(REPO)
        env.pop("CODEDECK_HOME", None)
        env.pop("NOTIFY_SOCKET", None)
        stderr = self.stderr_path.open("ab")
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "bridge",
            "desiide",
            "--home",
            str(self.home),
            "--log-dir",
            str(self.log_dir),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=stderr,
            env=env,
            cwd=REPO,
        )
        stderr.close()
        self._reader = asyncio.create_task(self._read())

    @property
    def stderr_text(self) -> str:
        return self.stderr_path.read_text() if self.stderr_path.exists() else ""

    async def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        while True:
            chunk = await self.proc.stdout.read(65536)
            if not chunk:
                break
            for body in self._decoder.feed(chunk):
                message = json.loads(body)
                assert isinstance(message, dict), message
                self.raw.append(message)
                await self._dispatch(message)
        for waiter in self._waiting.values():
            if not waiter.done():
                waiter.set_exception(ConnectionError("the orchestrator closed stdout"))
        self._changed.set()

    async def _dispatch(self, message: dict[str, Any]) -> None:
        if "method" in message and "id" in message:  # a reverse request
            assert message["method"] == "secrets.get", message
            ref = message["params"]["ref"]
            self.secret_asks.append(ref)
            value = self.secrets.get(ref.removeprefix("secret:"))
            self.send({"jsonrpc": "2.0", "id": message["id"], "result": {"value": value}})
            return
        if "method" in message:
            if message["method"] == "task.event":
                self.events.append(message["params"])
            elif message["method"] == "log":
                self.logs.append(message["params"])
            self._changed.set()
            return
        waiter = self._waiting.pop(message.get("id"), None)  # type: ignore[arg-type]
        if waiter is not None and not waiter.done():
            waiter.set_result(message)

    def send(self, message: Mapping[str, Any]) -> None:
        self.send_raw(encode_frame(json.dumps(message).encode()))

    def send_raw(self, data: bytes) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(data)

    async def request(
        self, method: str, params: Mapping[str, Any] | None = None, *, timeout: float = 60
    ) -> Any:
        """The result of `method`; :class:`RpcFailure` for an error answer."""
        message = await self.exchange(method, params, timeout=timeout)
        if "error" in message:
            error = message["error"]
            raise RpcFailure(error["code"], error["message"], error.get("data"))
        return message["result"]

    async def exchange(
        self, method: str, params: Mapping[str, Any] | None = None, *, timeout: float = 60
    ) -> dict[str, Any]:
        """The whole answer message of `method`."""
        request_id = self._next_id
        self._next_id += 1
        waiter: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting[request_id] = waiter
        body: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            body["params"] = dict(params)
        self.send(body)
        return await asyncio.wait_for(waiter, timeout)

    async def initialize(self, roots: list[str], version: str = "1.0.0") -> Any:
        return await self.request(
            "initialize",
            {
                "protocolVersion": version,
                "client": {"name": "desiide-test", "version": "0.0.1"},
                "workspaceRoots": roots,
            },
        )

    def task_events(self, task_id: str, kind: str | None = None) -> list[dict[str, Any]]:
        return [
            e
            for e in self.events
            if e.get("taskId") == task_id and (kind is None or e.get("type") == kind)
        ]

    async def wait_event(
        self, predicate: Callable[[dict[str, Any]], bool], timeout: float = 60
    ) -> dict[str, Any]:
        """The first event (already seen or to come) that `predicate` accepts."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        seen = 0
        while True:
            for event in self.events[seen:]:
                if predicate(event):
                    return event
            seen = len(self.events)
            left = deadline - loop.time()
            if left <= 0 or (self.proc is not None and self.proc.returncode is not None):
                types = [
                    (e.get("taskId", "")[-6:], e.get("type"), e.get("to")) for e in self.events
                ]
                raise AssertionError(
                    f"no matching event in {timeout} s; events: {types}\n"
                    f"stderr tail:\n{self.stderr_text[-4000:]}"
                )
            self._changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), min(left, 1.0))

    async def wait_state(self, task_id: str, state: str, timeout: float = 60) -> dict[str, Any]:
        return await self.wait_event(
            lambda e: (
                e.get("taskId") == task_id
                and e.get("type") == "state_changed"
                and e.get("to") == state
            ),
            timeout,
        )

    async def close(self, timeout: float = 30) -> int:
        """Close stdin (the editor went away) and wait for the exit status."""
        assert self.proc is not None and self.proc.stdin is not None
        with contextlib.suppress(ConnectionError):
            self.proc.stdin.close()
        code = await asyncio.wait_for(self.proc.wait(), timeout)
        if self._reader is not None:
            await asyncio.wait_for(self._reader, timeout)
        return code

    async def kill(self) -> None:
        """``kill -9`` if it still runs; wait for it and for the reader (a fixture's teardown)."""
        if self.proc is None:
            return
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()
        await self.proc.wait()
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        if self._reader is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._reader, 10)
