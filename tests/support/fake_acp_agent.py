"""A small ACP agent for tests: ``python tests/support/fake_acp_agent.py [options]``.

It speaks the Agent Client Protocol on its stdio with the official SDK's agent side
(``acp.run_agent``), like OpenCode or Gemini CLI would, but needs no model API and answers in a
few hundred milliseconds. The daemon's start-up check (:mod:`bridge.runtime.hosts.agent_probe`) and the
ACP driver (``bridge.agents.acp``) can both be tested against it.

Options come from ``$FAKE_ACP_ARGS`` (split like a shell would) followed by the command line, so
a test can change the behaviour through the agent's environment when the command is fixed:

=============================  ===================================================================
``--name N``, ``--version V``  ``agentInfo`` (default ``fake-acp-agent`` ``0.1.0``)
``--exit-at-start CODE``       write a line to stderr and exit with CODE before reading anything
``--hang``                     never answer ``initialize``
``--init-delay S``             answer ``initialize`` after S seconds
``--protocol-version N``       answer ``initialize`` with protocol version N (default: the SDK's)
``--no-load-session``          advertise ``loadSession: false``
``--models A,B``               the ``model`` config option's values (``provider/model`` ids; the
                               first is current); ``--models ""`` offers no model option
``--log FILE``                 append one JSON line per start (argv, cwd, env, pid) and per
                               request
``--state DIR``                keep sessions in DIR, so ``session/load`` works in a new process
=============================  ===================================================================

Prompts (the text of the first block; the first word decides):

- ``permission <command>``: a ``tool_call`` (kind ``execute``, ``rawInput {"command": …}``),
  then ``session/request_permission`` with options ``once``/``always``/``reject`` of kinds
  ``allow_once``/``allow_always``/``reject_once``; allowed → the command is appended to
  ``ran.txt`` in the session's cwd and the call completes with ``ran: <command>``, else it fails
  with ``denied``. Every answer (the option id, or ``cancelled``) is appended to ``answers.txt``
  there: what the agent was told, counted on disk.
- ``edit <path>``: the same with kind ``edit`` and ``rawInput {"filePath": path, "content": …}``.
- ``think <text>``: an ``agent_thought_chunk``, then the echo.
- ``slow``: waits until ``session/cancel`` (stop reason ``cancelled``).
- ``crash``: the process exits with status 3 at once.
- ``plan``: a ``plan`` update with two entries (completed, in progress), then the echo.
- ``fail``: the prompt answers a JSON-RPC error (``scripted failure``).
- anything else: ``echo: <text>`` in two ``agent_message_chunk`` s, a ``usage_update``, end_turn.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import shlex
import sys
import time
from pathlib import Path
from typing import Any

import acp
from acp import schema

__all__ = ["FAKE_AGENT", "fake_agent_command", "main"]

FAKE_AGENT = Path(__file__).resolve()
"""This script (run it with the test's Python)."""


def fake_agent_command(*args: str) -> list[str]:
    """The argv that starts the fake agent with `args`."""
    return [sys.executable, str(FAKE_AGENT), *args]


def _options(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="fake_acp_agent")
    parser.add_argument("--name", default="fake-acp-agent")
    parser.add_argument("--version", default="0.1.0")
    parser.add_argument("--exit-at-start", type=int)
    parser.add_argument("--hang", action="store_true")
    parser.add_argument("--init-delay", type=float, default=0.0)
    parser.add_argument("--protocol-version", type=int, default=acp.PROTOCOL_VERSION)
    parser.add_argument("--no-load-session", action="store_true")
    parser.add_argument("--models", default="fake/small,fake/large")
    parser.add_argument("--log")
    parser.add_argument("--state")
    return parser.parse_args(argv)


class FakeAgent:
    """The agent side (see the module docstring)."""

    def __init__(self, options: argparse.Namespace) -> None:
        self._options = options
        self._conn: Any = None
        self._ids = itertools.count(1)
        self._sessions: dict[str, dict[str, Any]] = {}
        self._cancelled: dict[str, asyncio.Event] = {}
        self._models = [m for m in options.models.split(",") if m]

    # --- plumbing --------------------------------------------------------------------------

    def on_connect(self, conn: Any) -> None:
        self._conn = conn

    def _log(self, record: dict[str, Any]) -> None:
        if self._options.log:
            with open(self._options.log, "a", encoding="utf-8") as out:
                out.write(json.dumps(record, default=str) + "\n")

    def _state_file(self, session_id: str) -> Path | None:
        return Path(self._options.state) / f"{session_id}.json" if self._options.state else None

    def _save(self, session_id: str) -> None:
        path = self._state_file(session_id)
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(self._sessions[session_id]))

    def _config(self, session: dict[str, Any]) -> list[Any]:
        options: list[Any] = [
            schema.SessionConfigOptionSelect(
                type="select",
                id="mode",
                name="Mode",
                category="mode",
                current_value=session["mode"],
                options=[
                    schema.SessionConfigSelectOption(value="build", name="Build"),
                    schema.SessionConfigSelectOption(value="plan", name="Plan"),
                ],
            )
        ]
        if self._models:
            options.append(
                schema.SessionConfigOptionSelect(
                    type="select",
                    id="model",
                    name="Model",
                    category="model",
                    current_value=session["model"],
                    options=[
                        schema.SessionConfigSelectOption(value=m, name=m.split("/")[-1].title())
                        for m in self._models
                    ],
                )
            )
        return options

    async def _update(self, session_id: str, update: Any) -> None:
        await self._conn.session_update(session_id=session_id, update=update)

    # --- the Agent protocol ----------------------------------------------------------------

    async def initialize(self, protocol_version: int, **kwargs: Any) -> schema.InitializeResponse:
        self._log({"method": "initialize", "protocol_version": protocol_version})
        if self._options.hang:
            await asyncio.Event().wait()
        if self._options.init_delay:
            await asyncio.sleep(self._options.init_delay)
        return schema.InitializeResponse(
            protocol_version=self._options.protocol_version,
            agent_capabilities=schema.AgentCapabilities(
                load_session=not self._options.no_load_session
            ),
            agent_info=schema.Implementation(
                name=self._options.name, version=self._options.version
            ),
        )

    async def new_session(self, cwd: str, **kwargs: Any) -> schema.NewSessionResponse:
        session_id = f"fake-{os.getpid()}-{next(self._ids)}"
        model = self._models[0] if self._models else ""
        self._sessions[session_id] = {"cwd": cwd, "mode": "build", "model": model, "history": []}
        self._save(session_id)
        self._log({"method": "session/new", "cwd": cwd, "session_id": session_id})
        return schema.NewSessionResponse(
            session_id=session_id, config_options=self._config(self._sessions[session_id])
        )

    async def load_session(
        self, cwd: str, session_id: str, **kwargs: Any
    ) -> schema.LoadSessionResponse | None:
        self._log({"method": "session/load", "cwd": cwd, "session_id": session_id})
        path = self._state_file(session_id)
        if session_id not in self._sessions and path is not None and path.is_file():
            self._sessions[session_id] = json.loads(path.read_text())
        session = self._sessions.get(session_id)
        if session is None:
            raise acp.RequestError.invalid_params({"sessionId": f"unknown session {session_id}"})
        for role, text in session["history"]:
            chunk = (
                acp.update_user_message_text(text)
                if role == "user"
                else acp.update_agent_message_text(text)
            )
            await self._update(session_id, chunk)
        return schema.LoadSessionResponse(config_options=self._config(session))

    async def set_session_mode(self, session_id: str, mode_id: str, **kwargs: Any) -> None:
        self._log({"method": "session/set_mode", "session_id": session_id, "mode": mode_id})
        self._sessions[session_id]["mode"] = mode_id
        self._save(session_id)
        await self._update(session_id, acp.helpers.update_current_mode(mode_id))

    async def set_config_option(
        self, config_id: str, session_id: str, value: str | bool, **kwargs: Any
    ) -> schema.SetSessionConfigOptionResponse:
        self._log({"method": "session/set_config_option", "id": config_id, "value": value})
        session = self._sessions[session_id]
        if config_id in ("mode", "model"):
            session[config_id] = value
            self._save(session_id)
        return schema.SetSessionConfigOptionResponse(config_options=self._config(session))

    async def authenticate(self, method_id: str, **kwargs: Any) -> None:
        self._log({"method": "authenticate", "method_id": method_id})

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        self._log({"method": "session/cancel", "session_id": session_id})
        self._cancelled.setdefault(session_id, asyncio.Event()).set()

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> Any:
        text = " ".join(getattr(block, "text", "") for block in prompt).strip()
        self._log({"method": "session/prompt", "session_id": session_id, "text": text})
        session = self._sessions[session_id]
        session["history"].append(("user", text))
        self._save(session_id)  # kept before any work, as OpenCode keeps a user message
        cancelled = self._cancelled[session_id] = asyncio.Event()
        word, _, rest = text.partition(" ")
        stop = "end_turn"
        if word == "crash":
            os._exit(3)
        elif word in ("permission", "edit"):
            await self._tool_call(session_id, word, rest)
        elif word == "fail":
            raise acp.RequestError.internal_error({"details": "scripted failure"})
        elif word == "slow":
            await cancelled.wait()
            stop = "cancelled"
        else:
            if word == "think":
                await self._update(session_id, acp.update_agent_thought_text(f"thinking: {rest}"))
            if word == "plan":
                entries = [
                    acp.plan_entry("read the code", status="completed"),
                    acp.plan_entry("fix the bug", status="in_progress"),
                ]
                await self._update(session_id, acp.update_plan(entries))
            await self._update(session_id, acp.update_agent_message_text("echo: "))
            await self._update(session_id, acp.update_agent_message_text(text))
            session["history"].append(("assistant", f"echo: {text}"))
            usage = schema.UsageUpdate(session_update="usage_update", used=42, size=200_000)
            await self._update(session_id, usage)
        self._save(session_id)
        return schema.PromptResponse(stop_reason=stop)

    async def _tool_call(self, session_id: str, word: str, rest: str) -> None:
        call_id = f"call-{next(self._ids)}"
        if word == "edit":
            kind, raw = "edit", {"filePath": rest, "content": "edited by the fake agent\n"}
        else:
            kind, raw = "execute", {"command": rest}
        await self._update(
            session_id,
            acp.start_tool_call(
                call_id, f"{word} {rest}", kind=kind, status="pending", raw_input=raw
            ),
        )
        answer = await self._conn.request_permission(
            session_id=session_id,
            tool_call=schema.ToolCallUpdate(tool_call_id=call_id, kind=kind, raw_input=raw),
            options=[
                schema.PermissionOption(option_id="once", name="Allow once", kind="allow_once"),
                schema.PermissionOption(option_id="always", name="Always", kind="allow_always"),
                schema.PermissionOption(option_id="reject", name="Reject", kind="reject_once"),
            ],
        )
        outcome = answer.outcome
        option_id = getattr(outcome, "option_id", None)
        allowed = option_id in ("once", "always")
        cwd = Path(self._sessions[session_id]["cwd"])
        with open(cwd / "answers.txt", "a", encoding="utf-8") as out:
            out.write(f"{option_id or outcome.outcome}\n")
        if allowed and kind == "execute":
            with open(cwd / "ran.txt", "a", encoding="utf-8") as out:
                out.write(rest + "\n")
        result = f"ran: {rest}" if allowed else "denied"
        await self._update(
            session_id,
            acp.update_tool_call(
                call_id,
                status="completed" if allowed else "failed",
                content=[acp.tool_content(acp.text_block(result))],
                raw_output={"output": result},
            ),
        )
        self._sessions[session_id]["history"].append(("assistant", result))


async def _serve(options: argparse.Namespace) -> None:
    await acp.run_agent(FakeAgent(options))  # type: ignore[arg-type]


def main(argv: list[str] | None = None) -> int:
    args = shlex.split(os.environ.get("FAKE_ACP_ARGS", "")) + list(
        sys.argv[1:] if argv is None else argv
    )
    options = _options(args)
    if options.log:
        with open(options.log, "a", encoding="utf-8") as out:
            record = {
                "event": "start",
                "at": time.time(),
                "pid": os.getpid(),
                "argv": args,
                "cwd": os.getcwd(),
                "env": dict(os.environ),
            }
            out.write(json.dumps(record) + "\n")
    if options.exit_at_start is not None:
        sys.stderr.write(f"fake agent: told to exit with status {options.exit_at_start}\n")
        sys.stderr.flush()
        return options.exit_at_start
    asyncio.run(_serve(options))
    return 0


if __name__ == "__main__":
    sys.exit(main())
