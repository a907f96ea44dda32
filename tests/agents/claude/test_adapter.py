"""The SDK → v10 entry adapter: table tests on SDK message objects, and recorded CLI frames."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from claude_agent_sdk import (
    AssistantMessage,
    ResultMessage,
    SystemMessage,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    UserMessage,
)
from claude_agent_sdk._internal.message_parser import parse_message

from bridge.agents.claude import Adapter, parse_session_meta, strip_session_meta
from bridge.protocol import OutputEntry

TS = "2026-01-01T00:00:00.000Z"
MODEL = "claude-opus-5-5"
RECORDED = Path(__file__).with_name("recorded_frames.json")


def assistant(
    *blocks: Any,
    message_id: str = "msg_1",
    parent: str | None = None,
    error: str | None = None,
    model: str = MODEL,
    usage: dict[str, Any] | None = None,
) -> AssistantMessage:
    return AssistantMessage(
        content=list(blocks),
        model=model,
        parent_tool_use_id=parent,
        error=error,  # type: ignore[arg-type]
        usage=usage if usage is not None else {"input_tokens": 10, "output_tokens": 2},
        message_id=message_id,
    )


def result(**overrides: Any) -> ResultMessage:
    fields: dict[str, Any] = {
        "subtype": "success",
        "duration_ms": 120,
        "duration_api_ms": 100,
        "is_error": False,
        "num_turns": 1,
        "session_id": "s",
        "total_cost_usd": 0.05,
        "usage": {"input_tokens": 10, "output_tokens": 2},
        "model_usage": {MODEL: {"contextWindow": 1000, "inputTokens": 10}},
    }
    fields.update(overrides)
    return ResultMessage(**fields)


def tool(name: str, tool_input: dict[str, Any], tool_id: str = "toolu_1") -> ToolUseBlock:
    return ToolUseBlock(id=tool_id, name=name, input=tool_input)


def run(adapter: Adapter, *messages: object) -> list[OutputEntry]:
    out: list[OutputEntry] = []
    for message in messages:
        out += adapter.convert(message, TS)
    return out + adapter.flush()


def brief(entries: list[OutputEntry]) -> list[tuple[str, str, dict[str, Any]]]:
    return [(e.entryType, e.content, dict(e.metadata or {})) for e in entries]


def test_text_alone_is_held_until_the_message_ends_then_shown() -> None:
    adapter = Adapter()
    assert adapter.convert(assistant(TextBlock("Hi")), TS) == []
    released = adapter.convert(result(), TS)
    assert brief(released)[:2] == [
        ("text", "Hi", {"role": "assistant", "model": MODEL, "display_hint": "show"}),
        ("system", "Tokens: 10 in / 2 out", {"usage": {"input_tokens": 10, "output_tokens": 2}}),
    ]


def test_text_then_tool_call_of_the_same_message_collapses_and_is_released_at_once() -> None:
    adapter = Adapter()
    assert adapter.convert(assistant(ThinkingBlock("hmm", "sig")), TS) == []
    assert adapter.convert(assistant(TextBlock("Let me look.")), TS) == []
    released = adapter.convert(assistant(tool("Bash", {"command": "ls -la"})), TS)
    assert [(e.entryType, e.content) for e in released] == [
        ("thinking", "hmm"),
        ("system", "Tokens: 10 in / 2 out"),
        ("text", "Let me look."),
        ("tool_use", "Bash: ls -la"),
    ]
    assert (released[2].metadata or {})["display_hint"] == "collapse"
    assert released[3].metadata == {
        "role": "assistant",
        "tool_name": "Bash",
        "tool_use_id": "toolu_1",
        "tool_input": {"command": "ls -la"},
    }
    # A later text of the same message: collapse, not held.
    later = adapter.convert(assistant(TextBlock("and more")), TS)
    assert brief(later) == [
        ("text", "and more", {"role": "assistant", "model": MODEL, "display_hint": "collapse"})
    ]


def test_side_band_system_frames_do_not_end_a_message() -> None:
    adapter = Adapter()
    adapter.convert(assistant(TextBlock("Checking.")), TS)
    assert adapter.convert(SystemMessage("thinking_tokens", {"tokens": 5}), TS) == []
    released = adapter.convert(assistant(tool("Read", {"file_path": "/w/a"})), TS)
    assert (released[0].metadata or {})["display_hint"] == "collapse"


def test_a_new_message_releases_the_previous_one() -> None:
    adapter = Adapter()
    adapter.convert(assistant(TextBlock("first"), message_id="m1"), TS)
    released = adapter.convert(assistant(TextBlock("second"), message_id="m2"), TS)
    assert next((e.content, (e.metadata or {}).get("display_hint")) for e in released) == (
        "first",
        "show",
    )


def test_subagent_messages_collapse_and_are_never_held() -> None:
    adapter = Adapter()
    out = adapter.convert(assistant(TextBlock("inner"), parent="toolu_agent"), TS)
    assert brief(out)[0] == (
        "text",
        "inner",
        {"role": "assistant", "model": MODEL, "display_hint": "collapse", "subagent": True},
    )
    think = adapter.convert(
        assistant(ThinkingBlock("", "sig"), parent="toolu_agent", message_id="m9"), TS
    )
    assert think[0].metadata == {
        "role": "assistant",
        "model": MODEL,
        "redacted": True,
        "subagent": True,
    }


@pytest.mark.parametrize(
    ("block", "content", "metadata"),
    [
        (ThinkingBlock("step 1", "sig"), "step 1", {"role": "assistant", "model": MODEL}),
        (ThinkingBlock("", "sig"), "", {"role": "assistant", "model": MODEL, "redacted": True}),
    ],
    ids=["thinking", "redacted"],
)
def test_thinking(block: ThinkingBlock, content: str, metadata: dict[str, Any]) -> None:
    entries = run(Adapter(), assistant(block))
    assert brief(entries)[0] == ("thinking", content, metadata)


@pytest.mark.parametrize("name", ["ExitPlanMode", "AskUserQuestion"])
def test_card_tools_show_neither_call_nor_result(name: str) -> None:
    adapter = Adapter()
    entries = run(
        adapter,
        assistant(tool(name, {"plan": "p"}, "toolu_card")),
        UserMessage([ToolResultBlock("toolu_card", "User has approved your plan.")]),
    )
    assert [e.entryType for e in entries] == ["system"]  # the token line only


def test_tool_results_are_cut_and_flag_errors() -> None:
    long = "x" * 2500
    entries = run(
        Adapter(),
        UserMessage([ToolResultBlock("toolu_1", long, is_error=None)]),
        UserMessage(
            [ToolResultBlock("toolu_2", [{"type": "text", "text": "boom"}], is_error=True)]
        ),
    )
    assert entries[0].content == "x" * 2000 + "...[truncated]"
    assert entries[0].metadata == {"tool_use_id": "toolu_1"}
    assert brief(entries)[1] == (
        "tool_result",
        "boom",
        {"tool_use_id": "toolu_2", "is_error": True},
    )


def test_diff_follows_the_tool_use_only_when_the_gate_allows() -> None:
    edit = tool("Edit", {"file_path": "/w/a.py", "old_string": "a = 1", "new_string": "a = 2\nb"})
    closed = run(Adapter(diff_allowed=lambda: False), assistant(edit))
    assert [e.entryType for e in closed] == ["tool_use", "system"]
    opened = run(Adapter(diff_allowed=lambda: True), assistant(edit))
    assert [e.entryType for e in opened] == ["tool_use", "diff", "system"]
    diff = opened[1]
    assert diff.content == "/w/a.py\n-a = 1\n+a = 2\n+b"
    assert diff.metadata == {"role": "assistant", "tool_name": "Edit", "tool_use_id": "toolu_1"}
    assert diff.diff is not None
    assert [(line.type, line.text) for line in diff.diff.lines] == [
        ("del", "a = 1"),
        ("add", "a = 2"),
        ("add", "b"),
    ]


def test_init_once_and_usage_once_per_message() -> None:
    adapter = Adapter()
    init = SystemMessage(
        "init",
        {
            "model": MODEL,
            "claude_code_version": "2.1.332",
            "tools": ["Bash"],
            "permissionMode": "plan",
        },
    )
    first = adapter.convert(init, TS)
    assert brief(first) == [
        (
            "system",
            f"Claude Code 2.1.332 ({MODEL})",
            {
                "subtype": "init",
                "model": MODEL,
                "version": "2.1.332",
                "tools": ["Bash"],
                "permissionMode": "plan",
            },
        )
    ]
    assert adapter.convert(init, TS) == []
    usage = {"input_tokens": 3, "cache_read_input_tokens": 100, "output_tokens": 7}
    entries = run(
        adapter,
        assistant(TextBlock("a"), usage=usage),
        assistant(tool("Read", {"file_path": "/w/x"}), usage=usage),
    )
    assert [e.content for e in entries if e.content.startswith("Tokens")] == [
        "Tokens: 103 in / 7 out"
    ]
    synthetic = run(Adapter(), assistant(TextBlock("x"), model="<synthetic>", message_id="z"))
    assert not [e for e in synthetic if e.content.startswith("Tokens")]


def test_result_cost_is_the_delta_of_the_cumulative_total() -> None:
    adapter = Adapter()
    first = adapter.convert(result(total_cost_usd=0.05, num_turns=1), TS)
    second = adapter.convert(result(total_cost_usd=0.125, num_turns=3), TS)
    assert first[0].content == "Session complete — 1 turn, $0.0500"
    assert second[0].content == "Session complete — 3 turns, $0.0750"
    assert second[0].metadata is not None
    assert second[0].metadata["total_cost_usd"] == 0.125
    assert second[0].metadata["cost_usd"] == 0.075
    assert first[-1].metadata == {"stream_end": True}
    resumed = Adapter()
    resumed.last_total_cost = 1.0  # seeded from the transcript on resume
    assert resumed.convert(result(total_cost_usd=1.2), TS)[0].content.endswith("$0.2000")


def test_result_carries_the_context_meter_of_the_last_call() -> None:
    adapter = Adapter()
    adapter.convert(assistant(TextBlock("x"), usage={"input_tokens": 240, "output_tokens": 10}), TS)
    entries = adapter.convert(result(), TS)
    meta = next(e for e in entries if (e.metadata or {}).get("subtype") == "result").metadata
    assert meta is not None
    assert (meta["context_window"], meta["context_percentage"]) == (1000, 25)


def test_api_errors_become_error_entries_once() -> None:
    adapter = Adapter()
    auth = assistant(
        TextBlock("Invalid API key · Fix external API key"),
        error="authentication_failed",
        model="<synthetic>",
    )
    failed = result(
        is_error=True, terminal_reason="api_error", api_error_status=401, result="Invalid API key"
    )
    entries = run(adapter, auth, failed)
    assert brief(entries) == [
        (
            "error",
            "Authentication failed: Invalid API key · Fix external API key",
            {"special": "auth_error"},
        ),
        ("system", "", {"stream_end": True}),
    ]
    server = run(Adapter(), assistant(TextBlock("API Error: 500"), error="server_error"))
    assert brief(server) == [("error", "API Error: 500", {"error_type": "server_error"})]


@pytest.mark.parametrize(
    ("overrides", "content", "metadata"),
    [
        ({"errors": ["one", "two"]}, "one\ntwo", {"error_type": "error_max_turns"}),
        ({"result": "went wrong"}, "went wrong", {"error_type": "error_max_turns"}),
        ({}, "error_max_turns", {"error_type": "error_max_turns"}),
    ],
    ids=["errors", "result-text", "subtype"],
)
def test_failed_results(overrides: dict[str, Any], content: str, metadata: dict[str, Any]) -> None:
    message = result(subtype="error_max_turns", is_error=True, **overrides)
    assert brief(Adapter().convert(message, TS))[0] == ("error", content, metadata)


def test_interrupted_turn_reads_interrupted() -> None:
    adapter = Adapter()
    entries = run(
        adapter,
        UserMessage([TextBlock("[Request interrupted by user]")]),
        result(
            subtype="error_during_execution",
            is_error=True,
            terminal_reason="aborted_streaming",
            errors=["[ede_diagnostic] result_type=user"],
        ),
    )
    assert brief(entries) == [
        ("system", "Interrupted", {"subtype": "interrupted"}),
        ("system", "", {"stream_end": True}),
    ]


def test_session_meta_is_reported_once_and_always_stripped() -> None:
    adapter = Adapter()
    tag = '<!-- session-meta: {"topic": "Fix the login bug", "project": "webapp"} -->'
    entries = run(
        adapter,
        assistant(TextBlock(f"On it. {tag}"), message_id="m1"),
        assistant(TextBlock(f"Again {tag}"), message_id="m2"),
    )
    texts = [e for e in entries if e.entryType == "text"]
    assert [e.content for e in texts] == ["On it.", "Again"]
    assert (texts[0].metadata or {})["session_meta"] == {
        "topic": "Fix the login bug",
        "project": "webapp",
    }
    assert "session_meta" not in (texts[1].metadata or {})
    only_tag = run(Adapter(), assistant(TextBlock(tag)))
    assert only_tag[0].content == "" and "session_meta" in (only_tag[0].metadata or {})


@pytest.mark.parametrize(
    ("text", "meta"),
    [
        ('<!-- session-meta: {"topic":"T","project":"P"} -->', ("T", "P")),
        ('<!--session-meta:{"topic":"' + "x" * 50 + '"}-->', ("x" * 40, "")),
        ("<!-- session-meta: not json -->", None),
        ('<!-- session-meta: ["a"] -->', None),
        ('<!-- session-meta: {"topic": 3} -->', None),
        ("no tag", None),
    ],
)
def test_parse_session_meta(text: str, meta: tuple[str, str] | None) -> None:
    parsed = parse_session_meta(text)
    assert (None if parsed is None else (parsed.topic, parsed.project)) == meta
    assert "session-meta" not in strip_session_meta(f"a {text} b") or text == "no tag"


def test_echoes_of_authored_texts_are_dropped_once_each() -> None:
    adapter = Adapter()
    adapter.authored("hello")
    entries = run(adapter, UserMessage("hello"), UserMessage("hello"), UserMessage("other"))
    assert brief(entries) == [
        ("text", "hello", {"role": "user"}),
        ("text", "other", {"role": "user"}),
    ]
    forgetful = Adapter()
    for n in range(17):
        forgetful.authored(f"t{n}")
    assert run(forgetful, UserMessage("t0"))[0].content == "t0"  # only the last 16 are known
    assert run(forgetful, UserMessage("t16")) == []


def test_local_command_output_and_compaction_are_system_lines() -> None:
    entries = run(
        Adapter(),
        UserMessage("<local-command-stdout>Set model to `sonnet`</local-command-stdout>"),
        SystemMessage("compact_boundary", {}),
        SystemMessage("status", {"permissionMode": "default"}),
    )
    assert brief(entries) == [
        ("system", "Set model to `sonnet`", {"subtype": "local_command"}),
        ("system", "Conversation compacted", {"subtype": "compact_boundary"}),
    ]


def _replay(scenario: str, diff: bool = False) -> list[OutputEntry]:
    frames = json.loads(RECORDED.read_text(encoding="utf-8"))[scenario]
    adapter = Adapter(diff_allowed=lambda: diff)
    out: list[OutputEntry] = []
    for frame in frames:
        message = parse_message(frame)
        if message is not None:
            out += adapter.convert(message, TS)
    return out + adapter.flush()


RECORDED_CASES: list[tuple[str, list[str]]] = [
    ("reply_with_thinking", ["init", "thinking", "Tokens", "text:show", "result", "end"]),
    (
        "write_allowed",
        [
            "init",
            "text:collapse",
            "Tokens",
            "tool_use",
            "diff",
            "tool_result",
            "text:show",
            "Tokens",
            "result",
            "end",
        ],
    ),
    (
        "write_denied",
        [
            "init",
            "tool_use",
            "diff",
            "Tokens",
            "tool_result!",
            "text:show",
            "Tokens",
            "result",
            "end",
        ],
    ),
    ("api_errors", ["init", "auth_error", "end", "error:server_error", "end"]),
    (
        "exit_plan",
        [
            "init",
            "tool_use",
            "diff",
            "Tokens",
            "tool_result",
            "tool_use",
            "Tokens",
            "tool_result",
            "Tokens",
            "text:show",
            "Tokens",
            "result",
            "end",
        ],
    ),
]


def _label(entry: OutputEntry) -> str:
    meta = entry.metadata or {}
    if entry.entryType == "text":
        return f"text:{meta.get('display_hint')}"
    if entry.entryType == "tool_result":
        return "tool_result!" if meta.get("is_error") else "tool_result"
    if entry.entryType == "error":
        return meta.get("special") or f"error:{meta.get('error_type')}"
    if entry.entryType == "system":
        if meta.get("stream_end"):
            return "end"
        if "subtype" in meta:
            return str(meta["subtype"])
        return entry.content.split(":")[0]
    return entry.entryType


@pytest.mark.parametrize(("scenario", "labels"), RECORDED_CASES, ids=[c[0] for c in RECORDED_CASES])
def test_recorded_cli_frames(scenario: str, labels: list[str]) -> None:
    assert [_label(e) for e in _replay(scenario, diff=True)] == labels


def test_recorded_exit_plan_hides_the_card_tool() -> None:
    entries = _replay("exit_plan")
    tools = [(e.metadata or {}).get("tool_name") for e in entries if e.entryType == "tool_use"]
    assert tools == ["Write", "ToolSearch"]  # the plan file, the tool search; no ExitPlanMode
