"""A fake Claude Code CLI speaking the stream-json control protocol, for the driver's unit tests.

Run as ``python fake_cli.py <the CLI's argv>`` (the tests give the driver a tiny shell wrapper as
``cli_path``). Standard library only; one asyncio loop. What it does:

- **initialize** → ``models``, ``pid``, ``hook_on_failure_supported`` (unless
  ``FAKE_NO_BLOCKING_HOOKS`` is set); the hooks config is remembered (``hook_0`` is called for
  every tool call when registered). ``get_settings`` → ``applied.model`` / ``applied.effort``.
  ``set_permission_mode`` (``"refuse"`` → error; a ``status`` frame reports the new mode),
  ``set_model`` (``"bad"`` → error), ``apply_flag_settings`` (``xhigh`` is clamped to ``high``),
  ``interrupt`` (the running turn ends ``aborted_*``; pending prompts get a
  ``control_cancel_request``).
- **user messages** are taken in order; each is recorded in the transcript
  (``$CLAUDE_CONFIG_DIR/projects/-fake/<session id>.jsonl``) and performs the directives of its
  text (space-separated words):

  ==================  ==========================================================================
  ``reply:WORD``      an assistant text
  ``tool:NAME``       a tool call: the hook (if registered), then ``can_use_tool`` unless the
                      hook said ``deny``; the answers are logged; the tool result follows
  ``slow``            the turn waits until interrupted
  ``crash:N``         exit with status N at once
  ``mode:M``          the CLI switches to mode M by itself (a ``status`` frame)
  ``ask_unknown``     send a control request of an unknown subtype (its answer is logged)
  ==================  ==========================================================================

- ``--resume=<id>`` of a conversation without a transcript: "No conversation found" on stderr,
  an error ``result``, exit 1.
- Everything notable is appended to ``$FAKE_CLI_LOG`` (JSON lines): ``start`` (argv, selected
  env), ``message``, ``answer`` (the answers to our requests), ``eof``, ``sigterm``.
- stdin EOF → logged, exit 0. SIGTERM → logged, exit 143.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import uuid
from pathlib import Path
from typing import Any

LOG = os.environ.get("FAKE_CLI_LOG")
MODELS = [
    {"value": "default", "displayName": "Default (recommended)"},
    {"value": "fast", "displayName": "Fast"},
    {"value": "fast", "displayName": "Fast again"},
    {"value": "", "displayName": "empty"},
    {"value": "plain"},
]


def log(kind: str, **data: Any) -> None:
    if LOG:
        with open(LOG, "a", encoding="utf-8") as f:
            f.write(json.dumps({"kind": kind, **data}) + "\n")
            f.flush()


def arg(name: str) -> str | None:
    argv = sys.argv[1:]
    for i, item in enumerate(argv):
        if item.startswith(f"--{name}="):
            return item.split("=", 1)[1]
        if item == f"--{name}" and i + 1 < len(argv):
            return argv[i + 1]
    return None


class Fake:
    def __init__(self) -> None:
        self.mode = arg("permission-mode") or "default"
        self.model = arg("model") or "fake-default"
        self.effort = arg("effort") or "medium"
        self.resume = arg("resume")
        self.session_id = self.resume or arg("session-id") or str(uuid.uuid4())
        config = os.environ.get("CLAUDE_CONFIG_DIR", str(Path.home() / ".claude"))
        self.transcript = Path(config) / "projects" / "-fake" / f"{self.session_id}.jsonl"
        self.hooks = False
        self.counter = 0
        self.pending: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self.inputs: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.interrupted = asyncio.Event()
        self.turn_running = False
        self.cost = 0.0
        self.out = sys.stdout

    def send(self, frame: dict[str, Any]) -> None:
        self.out.write(json.dumps(frame) + "\n")
        self.out.flush()

    def record(self, line: dict[str, Any]) -> None:
        self.transcript.parent.mkdir(parents=True, exist_ok=True)
        with open(self.transcript, "a", encoding="utf-8") as f:
            f.write(json.dumps(line) + "\n")

    async def request(self, request: dict[str, Any]) -> dict[str, Any]:
        """Send a control request of the CLI's and wait for the answer (cancelled: withdrawn)."""
        self.counter += 1
        request_id = f"cli-{self.counter}-{uuid.uuid4().hex[:6]}"
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self.pending[request_id] = future
        self.send({"type": "control_request", "request_id": request_id, "request": request})
        try:
            waiter: asyncio.Future[Any] = asyncio.ensure_future(self.interrupted.wait())
            done, _ = await asyncio.wait([future, waiter], return_when=asyncio.FIRST_COMPLETED)
            waiter.cancel()
            if future in done:
                answer = future.result()
                log("answer", subtype=request["subtype"], answer=answer)
                return answer
            self.send({"type": "control_cancel_request", "request_id": request_id})
            log("cancelled", subtype=request["subtype"])
            raise asyncio.CancelledError
        finally:
            self.pending.pop(request_id, None)

    # -- our side of the control protocol ------------------------------------------------------

    def control(self, request_id: str, request: dict[str, Any]) -> None:
        subtype = request.get("subtype")
        log("control", subtype=subtype, request=request)
        body: dict[str, Any] | None = None
        error: str | None = None
        if subtype == "initialize":
            self.hooks = bool(request.get("hooks"))
            body = {
                "models": MODELS,
                "pid": os.getpid(),
                "hooks_applied": True,
                "current_permission_mode": self.mode,
            }
            if not os.environ.get("FAKE_NO_BLOCKING_HOOKS"):
                body["hook_on_failure_supported"] = True
            if os.environ.get("FAKE_SILENT_INIT"):
                return
        elif subtype == "get_settings":
            body = {"applied": {"model": self.model, "effort": self.effort}}
        elif subtype == "set_permission_mode":
            if request.get("mode") == "refuse":
                error = "refused"
            else:
                self.mode = str(request.get("mode"))
                self.send({"type": "system", "subtype": "status", "permissionMode": self.mode})
                body = {"mode": self.mode}
        elif subtype == "set_model":
            if request.get("model") == "bad":
                error = "Unknown model: bad"
            else:
                self.model = str(request.get("model"))
                body = {"model": self.model}
        elif subtype == "apply_flag_settings":
            level = request.get("settings", {}).get("effortLevel")
            self.effort = "high" if level == "xhigh" else (level or "medium")
            body = {}
        elif subtype == "interrupt":
            if self.turn_running:
                self.interrupted.set()
            body = {"still_queued": []}
        else:
            error = f"unsupported: {subtype}"
        if error is not None:
            answer: dict[str, Any] = {"subtype": "error", "request_id": request_id, "error": error}
        else:
            answer = {"subtype": "success", "request_id": request_id, "response": body}
        self.send({"type": "control_response", "response": answer})

    # -- turns -----------------------------------------------------------------------------------

    def frame(self, kind: str, **fields: Any) -> dict[str, Any]:
        return {
            "type": kind,
            "session_id": self.session_id,
            "uuid": str(uuid.uuid4()),
            "parent_tool_use_id": None,
            **fields,
        }

    def assistant(self, block: dict[str, Any]) -> None:
        message = {
            "id": f"msg_{uuid.uuid4().hex[:8]}",
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": [block],
            "stop_reason": None,
            "usage": {"input_tokens": 1, "output_tokens": 1},
        }
        self.send(self.frame("assistant", message=message))

    def tool_result(self, tool_use_id: str, text: str, is_error: bool) -> None:
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": tool_use_id, "content": text}
        if is_error:
            block["is_error"] = True
        self.send(self.frame("user", message={"role": "user", "content": [block]}))

    def result(self, uuids: list[str], *, aborted: bool = False) -> None:
        self.cost += 0.01
        self.send(
            self.frame(
                "result",
                subtype="error_during_execution" if aborted else "success",
                is_error=aborted,
                duration_ms=1,
                duration_api_ms=1,
                num_turns=1,
                result="done",
                total_cost_usd=round(self.cost, 4),
                usage={"input_tokens": 1, "output_tokens": 1},
                user_message_uuids=uuids,
                terminal_reason="aborted_tools" if aborted else "completed",
            )
        )
        self.record({"type": "cost-state", "totalCostUSD": round(self.cost, 4)})

    async def turns(self) -> None:
        while True:
            message = await self.inputs.get()
            uuids = [message.get("uuid")]
            self.record(
                {"type": "user", "uuid": message.get("uuid"), "message": message["message"]}
            )
            self.turn_running = True
            self.interrupted.clear()
            self.send(
                self.frame(
                    "system",
                    subtype="init",
                    model=self.model,
                    permissionMode=self.mode,
                    claude_code_version="9.9.9",
                    tools=[],
                )
            )
            try:
                await self.perform(str(message["message"]["content"]))
                aborted = False
            except asyncio.CancelledError:
                aborted = True
                self.send(
                    self.frame(
                        "user",
                        message={"role": "user", "content": "[Request interrupted by user]"},
                    )
                )
            self.turn_running = False
            self.result([u for u in uuids if isinstance(u, str)], aborted=aborted)

    async def perform(self, text: str) -> None:
        for word in text.split():
            name, _, value = word.partition(":")
            if name == "reply":
                self.assistant({"type": "text", "text": value})
            elif name == "crash":
                log("crash", code=int(value))
                os._exit(int(value))
            elif name == "mode":
                self.mode = value
                self.send(self.frame("system", subtype="status", permissionMode=value))
            elif name == "slow":
                await self.interrupted.wait()
                raise asyncio.CancelledError
            elif name == "ask_unknown":
                await self.request({"subtype": "no_such_request"})
            elif name == "tool":
                await self.tool(value)

    async def tool(self, name: str) -> None:
        tool_use_id = f"toolu_{uuid.uuid4().hex[:12]}"
        tool_input = {"command": "touch x"}
        self.assistant({"type": "tool_use", "id": tool_use_id, "name": name, "input": tool_input})
        decision: Any = None
        if self.hooks:
            answer = await self.request(
                {
                    "subtype": "hook_callback",
                    "callback_id": "hook_0",
                    "input": {
                        "hook_event_name": "PreToolUse",
                        "tool_name": name,
                        "tool_input": tool_input,
                        "tool_use_id": tool_use_id,
                    },
                    "tool_use_id": tool_use_id,
                }
            )
            decision = answer.get("response", {}).get("hookSpecificOutput", {})
            decision = decision.get("permissionDecision")
            if answer.get("subtype") == "error":
                decision = "deny"
        if decision == "deny":
            self.tool_result(tool_use_id, "blocked by hook", True)
            return
        answer = await self.request(
            {
                "subtype": "can_use_tool",
                "tool_name": name,
                "input": tool_input,
                "tool_use_id": tool_use_id,
                "title": f"Run {name}",
                "permission_suggestions": [
                    {
                        "type": "addRules",
                        "rules": [{"toolName": name, "ruleContent": "touch x"}],
                        "behavior": "allow",
                        "destination": "localSettings",
                    }
                ],
            }
        )
        body = answer.get("response", {})
        allowed = answer.get("subtype") == "success" and body.get("behavior") == "allow"
        self.tool_result(tool_use_id, "ran" if allowed else str(body.get("message")), not allowed)

    # -- main ------------------------------------------------------------------------------------

    async def main(self) -> int:
        log(
            "start",
            pid=os.getpid(),
            argv=sys.argv[1:],
            env={k: v for k, v in os.environ.items() if _shown(k)},
        )
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, self.on_sigterm)
        if self.resume and not self.transcript.exists():
            print(f"No conversation found with session ID: {self.resume}", file=sys.stderr)
            self.result([], aborted=True)
            return 1
        print("fake cli ready", file=sys.stderr, flush=True)
        reader = asyncio.StreamReader(limit=2**24)
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
        turns = asyncio.ensure_future(self.turns())
        while True:
            line = await reader.readline()
            if not line:
                log("eof")
                turns.cancel()
                return 0
            message = json.loads(line)
            log("message", message=message)
            kind = message.get("type")
            if kind == "user":
                self.inputs.put_nowait(message)
            elif kind == "control_request":
                self.control(message["request_id"], message["request"])
            elif kind == "control_response":
                response = message["response"]
                future = self.pending.get(response.get("request_id"))
                if future is not None and not future.done():
                    future.set_result(response)
                else:
                    log("stray_answer", response=response)

    def on_sigterm(self) -> None:
        log("sigterm")
        os._exit(143)


def _shown(name: str) -> bool:
    return name.startswith(("CLAUDE", "FAKE_", "PWD")) or name in ("HOME", "PATH", "SECRET")


if __name__ == "__main__":
    sys.exit(asyncio.run(Fake().main()))
