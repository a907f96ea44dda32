"""The stream-json → v10 entry adapter: table tests on raw CLI frames, and recorded CLI frames.

Frames are plain dicts exactly as the CLI prints them; every entry the adapter produces is held
to the wire contract with ``OutputEntry.model_validate`` (see :func:`checked`).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bridge.agents.claude.adapter import Adapter, parse_session_meta, strip_session_meta
from bridge.protocol import OutputEntry

TS = "2026-01-01T00:00:00.000Z"
MODEL = "claude-opus-5-5"
RECORDED = Path(__file__).with_name("recorded_frames.json")
CONTROL_TYPES = ("control_request", "control_response", "control_cancel_request")
DEFAULT_USAGE: dict[str, Any] = {"input_tokens": 10, "output_tokens": 2}


# -- frame builders (the CLI's shapes; see the SDK's message_parser for the typed mapping) -------


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def thinking(value: str) -> dict[str, Any]:
    return {"type": "thinking", "thinking": value, "signature": "sig"}


def tool(name: str, tool_input: dict[str, Any], tool_id: str = "toolu_1") -> dict[str, Any]:
    return {"type": "tool_use", "id": tool_id, "name": name, "input": tool_input}


def tool_result(tool_id: str, content: Any, is_error: bool | None = None) -> dict[str, Any]:
    block = {"type": "tool_result", "tool_use_id": tool_id, "content": content}
    if is_error is not None:
        block["is_error"] = is_error
    return block


def assistant(
    *blocks: Any,
    message_id: str = "msg_1",
    parent: str | None = None,
    error: str | None = None,
    model: str = MODEL,
    usage: dict[str, Any] | None = None,
) -> dict[str, Any]:
    frame: dict[str, Any] = {
        "type": "assistant",
        "message": {
            "id": message_id,
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": list(blocks),
            "stop_reason": None,
            "usage": usage if usage is not None else dict(DEFAULT_USAGE),
        },
        "parent_tool_use_id": parent,
        "session_id": "s",
        "uuid": "u-assistant",
    }
    if error is not None:
        frame["error"] = error
    return frame


def user(content: Any, parent: str | None = None) -> dict[str, Any]:
    return {
        "type": "user",
        "message": {"role": "user", "content": content},
        "parent_tool_use_id": parent,
        "session_id": "s",
        "uuid": "u-user",
    }


def result(**overrides: Any) -> dict[str, Any]:
    frame: dict[str, Any] = {
        "type": "result",
        "subtype": "success",
        "duration_ms": 120,
        "duration_api_ms": 100,
        "is_error": False,
        "num_turns": 1,
        "session_id": "s",
        "total_cost_usd": 0.05,
        "usage": {"input_tokens": 10, "output_tokens": 2},
        "modelUsage": {MODEL: {"contextWindow": 1000, "inputTokens": 10}},
        "terminal_reason": "completed",
        "uuid": "u-result",
    }
    frame.update(overrides)
    return frame


def system(subtype: str, **data: Any) -> dict[str, Any]:
    return {"type": "system", "subtype": subtype, "session_id": "s", "uuid": "u-system", **data}


# -- helpers ----------------------------------------------------------------------------------


def checked(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`entries`, each held to the wire's ``OutputEntry``: valid, and nothing dropped or coerced."""
    for entry in entries:
        model = OutputEntry.model_validate(entry)
        assert model.model_dump(exclude_none=True) == entry
    return entries


def convert(adapter: Adapter, frame: dict[str, Any], ts: str = TS) -> list[dict[str, Any]]:
    return checked(adapter.convert(frame, ts))


def run(adapter: Adapter, *frames: dict[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for frame in frames:
        out += convert(adapter, frame)
    return out + checked(adapter.flush())


def brief(entries: list[dict[str, Any]]) -> list[tuple[str, str, dict[str, Any]]]:
    return [(e["entryType"], e["content"], dict(e.get("metadata") or {})) for e in entries]


def meta(entry: dict[str, Any]) -> dict[str, Any]:
    return dict(entry.get("metadata") or {})


# -- held text and display hints ---------------------------------------------------------------


def test_text_alone_is_held_until_the_message_ends_then_shown() -> None:
    adapter = Adapter()
    assert convert(adapter, assistant(text("Hi"))) == []
    released = convert(adapter, result())
    assert brief(released)[:2] == [
        ("text", "Hi", {"role": "assistant", "model": MODEL, "display_hint": "show"}),
        ("system", "Tokens: 10 in / 2 out", {"usage": {"input_tokens": 10, "output_tokens": 2}}),
    ]


def test_text_then_tool_call_of_the_same_message_collapses_and_is_released_at_once() -> None:
    adapter = Adapter()
    assert convert(adapter, assistant(thinking("hmm"))) == []
    assert convert(adapter, assistant(text("Let me look."))) == []
    released = convert(adapter, assistant(tool("Bash", {"command": "ls -la"})))
    assert [(e["entryType"], e["content"]) for e in released] == [
        ("thinking", "hmm"),
        ("system", "Tokens: 10 in / 2 out"),
        ("text", "Let me look."),
        ("tool_use", "Bash: ls -la"),
    ]
    assert meta(released[2])["display_hint"] == "collapse"
    assert released[3]["metadata"] == {
        "role": "assistant",
        "tool_name": "Bash",
        "tool_use_id": "toolu_1",
        "tool_input": {"command": "ls -la"},
    }
    # A later text of the same message: collapse, not held.
    later = convert(adapter, assistant(text("and more")))
    assert brief(later) == [
        ("text", "and more", {"role": "assistant", "model": MODEL, "display_hint": "collapse"})
    ]


def test_server_tool_calls_release_held_text_too() -> None:
    adapter = Adapter()
    convert(adapter, assistant(text("Searching.")))
    call = {"type": "server_tool_use", "id": "srv_1", "name": "WebSearch", "input": {"query": "q"}}
    released = convert(adapter, assistant(call))
    assert [(e["entryType"], meta(e).get("display_hint")) for e in released] == [
        ("text", "collapse"),
        ("system", None),
        ("tool_use", None),
    ]
    assert released[2]["content"] == "WebSearch: q"


def test_side_band_system_frames_do_not_end_a_message() -> None:
    adapter = Adapter()
    convert(adapter, assistant(text("Checking.")))
    assert convert(adapter, system("thinking_tokens", tokens=5)) == []
    assert convert(adapter, system("status", permissionMode="default")) == []
    released = convert(adapter, assistant(tool("Read", {"file_path": "/w/a"})))
    assert meta(released[0])["display_hint"] == "collapse"


@pytest.mark.parametrize(
    "frame",
    [
        {"type": "stream_event", "uuid": "u", "session_id": "s", "event": {"type": "ping"}},
        {"type": "rate_limit_event", "rate_limit_info": {"status": "allowed"}, "uuid": "u"},
        {"type": "conversation_reset", "new_conversation_id": "c2"},
        {"type": "some_frame_of_a_newer_cli", "data": [1, 2]},
        {"subtype": "init", "model": MODEL},  # no type at all
        {"type": ["assistant"]},
    ],
    ids=["stream_event", "rate_limit_event", "conversation_reset", "unknown", "untyped", "odd"],
)
def test_other_frames_show_nothing_and_do_not_end_a_message(frame: dict[str, Any]) -> None:
    adapter = Adapter()
    convert(adapter, assistant(text("Checking.")))
    assert convert(adapter, frame) == []
    released = convert(adapter, assistant(tool("Read", {"file_path": "/w/a"})))
    assert meta(released[0])["display_hint"] == "collapse"


def test_a_new_message_releases_the_previous_one() -> None:
    adapter = Adapter()
    convert(adapter, assistant(text("first"), message_id="m1"))
    released = convert(adapter, assistant(text("second"), message_id="m2"))
    assert next((e["content"], meta(e).get("display_hint")) for e in released) == (
        "first",
        "show",
    )


def test_held_entries_keep_the_timestamp_of_their_frame() -> None:
    adapter = Adapter()
    adapter.convert(assistant(text("early")), "2026-01-01T00:00:01.000Z")
    released = adapter.convert(result(), "2026-01-01T00:00:09.000Z")
    assert [e["timestamp"][17:19] for e in released] == ["01", "01", "09", "09"]


def test_a_user_frame_or_a_showing_system_frame_ends_a_message() -> None:
    adapter = Adapter()
    convert(adapter, assistant(text("one")))
    assert brief(convert(adapter, user([tool_result("toolu_x", "ok")])))[0][:2] == ("text", "one")
    convert(adapter, assistant(text("two"), message_id="m2"))
    shown = convert(adapter, system("compact_boundary"))
    assert [(e["content"], meta(e).get("display_hint")) for e in shown] == [
        ("two", "show"),
        ("Tokens: 10 in / 2 out", None),
        ("Conversation compacted", None),
    ]


def test_flush_releases_what_is_held_once() -> None:
    adapter = Adapter()
    convert(adapter, assistant(text("pending")))
    assert [e["content"] for e in checked(adapter.flush())] == ["pending", "Tokens: 10 in / 2 out"]
    assert adapter.flush() == []


# -- sub-agents, parent_tool_use_id -------------------------------------------------------------


def test_subagent_messages_collapse_and_are_never_held() -> None:
    adapter = Adapter()
    out = convert(adapter, assistant(text("inner"), parent="toolu_agent"))
    assert brief(out)[0] == (
        "text",
        "inner",
        {"role": "assistant", "model": MODEL, "display_hint": "collapse", "subagent": True},
    )
    think = convert(adapter, assistant(thinking(""), parent="toolu_agent", message_id="m9"))
    assert think[0]["metadata"] == {
        "role": "assistant",
        "model": MODEL,
        "redacted": True,
        "subagent": True,
    }
    calls = Adapter(diff_allowed=lambda: True)
    edit = tool("Write", {"file_path": "/w/a", "content": "x"}, "toolu_sub")
    out = convert(calls, assistant(edit, parent="toolu_agent", usage={}))
    assert [(e["entryType"], meta(e).get("subagent")) for e in out] == [
        ("tool_use", True),
        ("diff", True),
        ("system", None),  # the usage line
    ]


def test_parent_tool_use_id_absent_or_null_is_the_main_thread() -> None:
    frame = assistant(text("main"))
    del frame["parent_tool_use_id"]
    adapter = Adapter()
    assert convert(adapter, frame) == []  # held: a main-thread message
    assert meta(checked(adapter.flush())[0]) == {
        "role": "assistant",
        "model": MODEL,
        "display_hint": "show",
    }
    reply = user([text("sub-agent prompt"), tool_result("toolu_9", "done")], parent="toolu_agent")
    assert brief(run(Adapter(), reply)) == [
        ("tool_result", "done", {"tool_use_id": "toolu_9", "subagent": True})
    ]
    bare = user([text("a user line"), tool_result("toolu_9", "done")])
    del bare["parent_tool_use_id"]
    assert brief(run(Adapter(), bare)) == [
        ("text", "a user line", {"role": "user"}),
        ("tool_result", "done", {"tool_use_id": "toolu_9"}),
    ]


def test_subagent_usage_does_not_move_the_context_meter() -> None:
    adapter = Adapter()
    convert(adapter, assistant(text("x"), usage={"input_tokens": 240, "output_tokens": 10}))
    convert(
        adapter,
        assistant(text("y"), parent="toolu_a", message_id="m2", usage={"input_tokens": 900}),
    )
    entries = convert(adapter, result())
    summary = next(e for e in entries if meta(e).get("subtype") == "result")
    assert meta(summary)["context_percentage"] == 25


# -- blocks -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("block", "content", "metadata"),
    [
        (thinking("step 1"), "step 1", {"role": "assistant", "model": MODEL}),
        (thinking(""), "", {"role": "assistant", "model": MODEL, "redacted": True}),
        ({"type": "thinking"}, "", {"role": "assistant", "model": MODEL, "redacted": True}),
    ],
    ids=["thinking", "redacted", "no-text"],
)
def test_thinking(block: dict[str, Any], content: str, metadata: dict[str, Any]) -> None:
    entries = run(Adapter(), assistant(block))
    assert brief(entries)[0] == ("thinking", content, metadata)


@pytest.mark.parametrize("name", ["ExitPlanMode", "AskUserQuestion"])
def test_card_tools_show_neither_call_nor_result(name: str) -> None:
    adapter = Adapter()
    entries = run(
        adapter,
        assistant(tool(name, {"plan": "p"}, "toolu_card")),
        user([tool_result("toolu_card", "User has approved your plan.")]),
    )
    assert [e["entryType"] for e in entries] == ["system"]  # the token line only


def test_tool_results_are_cut_and_flag_errors() -> None:
    long = "x" * 2500
    entries = run(
        Adapter(),
        user([tool_result("toolu_1", long)]),
        user([tool_result("toolu_2", [{"type": "text", "text": "boom"}], is_error=True)]),
        user([tool_result("toolu_3", "fine", is_error=False)]),
    )
    assert entries[0]["content"] == "x" * 2000 + "...[truncated]"
    assert entries[0]["metadata"] == {"tool_use_id": "toolu_1"}
    assert brief(entries)[1:] == [
        ("tool_result", "boom", {"tool_use_id": "toolu_2", "is_error": True}),
        ("tool_result", "fine", {"tool_use_id": "toolu_3"}),
    ]


def test_tool_results_inside_an_assistant_message_never_flag_errors() -> None:
    advisor = {"type": "advisor_tool_result", "tool_use_id": "srv_2", "content": "advice"}
    entries = run(Adapter(), assistant(tool_result("toolu_4", "r", is_error=True), advisor))
    assert brief(entries)[:2] == [
        ("tool_result", "r", {"tool_use_id": "toolu_4"}),
        ("tool_result", "advice", {"tool_use_id": "srv_2"}),
    ]


def test_diff_follows_the_tool_use_only_when_the_gate_allows() -> None:
    edit = tool("Edit", {"file_path": "/w/a.py", "old_string": "a = 1", "new_string": "a = 2\nb"})
    closed = run(Adapter(diff_allowed=lambda: False), assistant(edit))
    assert [e["entryType"] for e in closed] == ["tool_use", "system"]
    asked: list[str] = []

    def gate() -> bool:
        asked.append("asked")
        return True

    opened = run(Adapter(diff_allowed=gate), assistant(edit))
    assert asked == ["asked"]  # once per diff tool call
    assert [e["entryType"] for e in opened] == ["tool_use", "diff", "system"]
    diff = opened[1]
    assert diff["content"] == "/w/a.py\n-a = 1\n+a = 2\n+b"
    assert diff["metadata"] == {"role": "assistant", "tool_name": "Edit", "tool_use_id": "toolu_1"}
    assert diff["diff"] == {
        "path": "/w/a.py",
        "lines": [
            {"type": "del", "text": "a = 1"},
            {"type": "add", "text": "a = 2"},
            {"type": "add", "text": "b"},
        ],
    }
    assert (
        run(Adapter(diff_allowed=lambda: True), assistant(tool("Bash", {"command": "ls"})))[0][
            "entryType"
        ]
        == "tool_use"
    )


def test_init_once_and_usage_once_per_message() -> None:
    adapter = Adapter()
    init = system(
        "init", model=MODEL, claude_code_version="2.1.332", tools=["Bash"], permissionMode="plan"
    )
    first = convert(adapter, init)
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
    assert convert(adapter, init) == []
    usage = {"input_tokens": 3, "cache_read_input_tokens": 100, "output_tokens": 7}
    entries = run(
        adapter,
        assistant(text("a"), usage=usage),
        assistant(tool("Read", {"file_path": "/w/x"}), usage=usage),
    )
    assert [e["content"] for e in entries if e["content"].startswith("Tokens")] == [
        "Tokens: 103 in / 7 out"
    ]
    synthetic = run(Adapter(), assistant(text("x"), model="<synthetic>", message_id="z"))
    assert not [e for e in synthetic if e["content"].startswith("Tokens")]


def test_init_without_version_or_model() -> None:
    entries = convert(Adapter(), system("init", tools="not a list"))
    assert brief(entries) == [
        ("system", "Claude Code (unknown model)", {"subtype": "init", "model": "unknown model"})
    ]


# -- results ----------------------------------------------------------------------------------


def test_result_cost_is_the_delta_of_the_cumulative_total() -> None:
    adapter = Adapter()
    first = convert(adapter, result(total_cost_usd=0.05, num_turns=1))
    second = convert(adapter, result(total_cost_usd=0.125, num_turns=3))
    assert first[0]["content"] == "Session complete — 1 turn, $0.0500"
    assert second[0]["content"] == "Session complete — 3 turns, $0.0750"
    assert second[0]["metadata"]["total_cost_usd"] == 0.125
    assert second[0]["metadata"]["cost_usd"] == 0.075
    assert first[-1]["metadata"] == {"stream_end": True}
    assert adapter.last_total_cost == 0.125
    resumed = Adapter()
    resumed.last_total_cost = 1.0  # seeded from the transcript on resume
    assert convert(resumed, result(total_cost_usd=1.2))[0]["content"].endswith("$0.2000")
    lower = Adapter()
    lower.last_total_cost = 2.0  # a total below the seed (another session's transcript): no cost
    assert convert(lower, result(total_cost_usd=1.0))[0]["metadata"]["cost_usd"] == 0


def test_result_metadata_is_the_frames_fields() -> None:
    entries = convert(Adapter(), result())
    assert entries[0]["metadata"] == {
        "subtype": "result",
        "duration_ms": 120,
        "num_turns": 1,
        "total_cost_usd": 0.05,
        "cost_usd": 0.05,
        "usage": {"input_tokens": 10, "output_tokens": 2},
        "model_usage": {MODEL: {"contextWindow": 1000, "inputTokens": 10}},
    }


def test_result_without_a_cost_counts_nothing() -> None:
    adapter = Adapter()
    frame = result()
    del frame["total_cost_usd"]
    entries = convert(adapter, frame)
    assert entries[0]["content"].endswith("$0.0000")
    assert "total_cost_usd" not in entries[0]["metadata"]
    assert adapter.last_total_cost is None
    assert convert(adapter, result(total_cost_usd=True))[0]["content"].endswith("$0.0000")


def test_result_carries_the_context_meter_of_the_last_call() -> None:
    adapter = Adapter()
    convert(adapter, assistant(text("x"), usage={"input_tokens": 240, "output_tokens": 10}))
    entries = convert(adapter, result())
    summary = next(e for e in entries if meta(e).get("subtype") == "result")
    assert (meta(summary)["context_window"], meta(summary)["context_percentage"]) == (1000, 25)


@pytest.mark.parametrize(
    ("model_usage", "expected"),
    [
        ({"other": {"contextWindow": 400}, "more": {"contextWindow": 800}}, (800, 31)),
        ({MODEL: {"contextWindow": 0}}, None),
        ({MODEL: {"inputTokens": 3}}, None),
        ({"other": "not an object"}, None),
        ("not an object", None),
        ({MODEL: {"contextWindow": 100}}, (100, 100)),
    ],
    ids=["other-models", "zero-window", "no-window", "junk", "not-a-map", "capped"],
)
def test_context_meter_edges(model_usage: Any, expected: tuple[int, int] | None) -> None:
    adapter = Adapter()
    convert(adapter, assistant(text("x"), usage={"input_tokens": 240, "output_tokens": 10}))
    entries = convert(adapter, result(modelUsage=model_usage))
    summary = next(meta(e) for e in entries if meta(e).get("subtype") == "result")
    got = (summary["context_window"], summary["context_percentage"]) if expected else None
    assert got == expected
    assert ("context_window" in summary) is (expected is not None)


def test_no_context_meter_before_a_call() -> None:
    assert "context_window" not in meta(convert(Adapter(), result())[0])


def test_api_errors_become_error_entries_once() -> None:
    adapter = Adapter()
    auth = assistant(
        text("Invalid API key · Fix external API key"),
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
    server = run(Adapter(), assistant(text("API Error: 500"), error="server_error"))
    assert brief(server) == [("error", "API Error: 500", {"error_type": "server_error"})]
    silent = run(Adapter(), assistant(error="rate_limit"), assistant(error="authentication_failed"))
    assert brief(silent) == [
        ("error", "API error: rate_limit", {"error_type": "rate_limit"}),
        (
            "error",
            "Authentication failed: the API refused the credentials",
            {"special": "auth_error"},
        ),
    ]


def test_an_api_error_releases_held_text_first() -> None:
    adapter = Adapter()
    convert(adapter, assistant(text("Working.")))
    out = convert(adapter, assistant(text("API Error: 529"), error="overloaded", message_id="m2"))
    assert [(e["entryType"], e["content"]) for e in out] == [
        ("text", "Working."),
        ("system", "Tokens: 10 in / 2 out"),
        ("error", "API Error: 529"),
    ]


@pytest.mark.parametrize(
    ("overrides", "content", "metadata"),
    [
        ({"errors": ["one", " ", "two"]}, "one\ntwo", {"error_type": "error_max_turns"}),
        ({"result": " went wrong "}, "went wrong", {"error_type": "error_max_turns"}),
        (
            {"errors": "not a list", "result": 3},
            "error_max_turns",
            {"error_type": "error_max_turns"},
        ),
        ({}, "error_max_turns", {"error_type": "error_max_turns"}),
        ({"subtype": None}, "error", {"error_type": "error"}),
    ],
    ids=["errors", "result-text", "junk", "subtype", "no-subtype"],
)
def test_failed_results(overrides: dict[str, Any], content: str, metadata: dict[str, Any]) -> None:
    frame = {**result(subtype="error_max_turns", is_error=True), **overrides}
    entries = convert(Adapter(), frame)
    assert brief(entries) == [("error", content, metadata), ("system", "", {"stream_end": True})]


@pytest.mark.parametrize("reason", ["aborted_streaming", "aborted_tools"])
def test_interrupted_turn_reads_interrupted(reason: str) -> None:
    adapter = Adapter()
    entries = run(
        adapter,
        user([text("[Request interrupted by user]")]),
        result(
            subtype="error_during_execution",
            is_error=True,
            terminal_reason=reason,
            errors=["[ede_diagnostic] result_type=user"],
        ),
    )
    assert brief(entries) == [
        ("system", "Interrupted", {"subtype": "interrupted"}),
        ("system", "", {"stream_end": True}),
    ]


# -- session meta, echoes, local commands -----------------------------------------------------


def test_session_meta_is_reported_once_and_always_stripped() -> None:
    adapter = Adapter()
    tag = '<!-- session-meta: {"topic": "Fix the login bug", "project": "webapp"} -->'
    entries = run(
        adapter,
        assistant(text(f"On it. {tag}"), message_id="m1"),
        assistant(text(f"Again {tag}"), message_id="m2"),
    )
    texts = [e for e in entries if e["entryType"] == "text"]
    assert [e["content"] for e in texts] == ["On it.", "Again"]
    assert meta(texts[0])["session_meta"] == {"topic": "Fix the login bug", "project": "webapp"}
    assert "session_meta" not in meta(texts[1])
    assert adapter.meta_found
    only_tag = run(Adapter(), assistant(text(tag)))
    assert only_tag[0]["content"] == "" and "session_meta" in meta(only_tag[0])
    # An invalid tag alone leaves nothing to show.
    invalid = _without(assistant(text("<!-- session-meta: nope -->")), "message", "usage")
    assert run(Adapter(), invalid) == []


@pytest.mark.parametrize(
    ("value", "parsed"),
    [
        ('<!-- session-meta: {"topic":"T","project":"P"} -->', ("T", "P")),
        ('<!--session-meta:{"topic":"' + "x" * 50 + '"}-->', ("x" * 40, "")),
        ("<!-- session-meta: not json -->", None),
        ('<!-- session-meta: ["a"] -->', None),
        ('<!-- session-meta: {"topic": 3} -->', None),
        ("no tag", None),
    ],
)
def test_parse_session_meta(value: str, parsed: tuple[str, str] | None) -> None:
    got = parse_session_meta(value)
    assert (None if got is None else (got.topic, got.project)) == parsed
    assert "session-meta" not in strip_session_meta(f"a {value} b") or value == "no tag"


def test_echoes_of_authored_texts_are_dropped_once_each() -> None:
    adapter = Adapter()
    adapter.authored("hello")
    entries = run(adapter, user("hello"), user("hello"), user("other"))
    assert brief(entries) == [
        ("text", "hello", {"role": "user"}),
        ("text", "other", {"role": "user"}),
    ]
    forgetful = Adapter()
    for n in range(17):
        forgetful.authored(f"t{n}")
    assert run(forgetful, user("t0"))[0]["content"] == "t0"  # only the last 16 are known
    assert run(forgetful, user("t16")) == []
    blocks = Adapter()
    blocks.authored("as a block")
    assert run(blocks, user([text("as a block")])) == []


def test_local_command_output_and_compaction_are_system_lines() -> None:
    entries = run(
        Adapter(),
        user("<local-command-stdout>Set model to `sonnet`</local-command-stdout>"),
        system("compact_boundary"),
        system("status", permissionMode="default"),
        user("   "),
    )
    assert brief(entries) == [
        ("system", "Set model to `sonnet`", {"subtype": "local_command"}),
        ("system", "Conversation compacted", {"subtype": "compact_boundary"}),
    ]


def test_a_subagent_prompt_as_a_string_is_still_a_user_line() -> None:
    # The SDK handed a string content over as is, sub-agent or not; the adapter kept it.
    assert brief(run(Adapter(), user("delegated task", parent="toolu_agent"))) == [
        ("text", "delegated task", {"role": "user"})
    ]


# -- raw shapes the SDK's parser used to normalise (or refuse) -------------------------------


def _without(frame: dict[str, Any], *path: str) -> dict[str, Any]:
    frame = copy.deepcopy(frame)
    node = frame
    for key in path[:-1]:
        node = node[key]
    del node[path[-1]]
    return frame


def test_an_assistant_frame_without_model_or_id() -> None:
    no_model = run(Adapter(), _without(assistant(text("hi")), "message", "model"))
    assert brief(no_model)[0] == ("text", "hi", {"role": "assistant", "display_hint": "show"})
    # No id: no usage line (nothing to count it once by), and two such frames are two messages.
    adapter = Adapter()
    first = _without(assistant(text("a")), "message", "id")
    second = _without(assistant(tool("Read", {"file_path": "/w"})), "message", "id")
    out = run(adapter, first, second)
    assert [(e["entryType"], meta(e).get("display_hint")) for e in out] == [
        ("text", "show"),
        ("tool_use", None),
    ]


@pytest.mark.parametrize(
    "frame",
    [
        {"type": "assistant"},
        {"type": "assistant", "message": "not an object"},
        {"type": "assistant", "message": {"model": MODEL, "content": "plain text"}},
        {"type": "assistant", "message": {"model": MODEL, "content": None}},
        assistant("not a block", 7, None, ["x"]),
        assistant({"text": "no type"}, {"type": "text"}, {"type": "text", "text": 3}),
        assistant({"type": "tool_use", "name": "Bash", "input": {}}),  # no id
        assistant({"type": "tool_use", "id": "toolu_1", "input": {}}),  # no name
        assistant({"type": "tool_result", "content": "x"}),  # no tool_use_id
        assistant({"type": "redacted_thinking", "data": "…"}),  # never shown by the SDK either
        assistant({"type": "web_search_tool_result", "tool_use_id": "s", "content": []}),
    ],
    ids=[
        "no-message",
        "message-not-an-object",
        "content-a-string",
        "content-null",
        "blocks-not-objects",
        "text-without-text",
        "tool-use-without-id",
        "tool-use-without-name",
        "tool-result-without-id",
        "redacted-thinking-block",
        "server-result-block",
    ],
)
def test_malformed_assistant_content_shows_no_block(frame: dict[str, Any]) -> None:
    entries = run(Adapter(), frame)
    assert [e for e in entries if not e["content"].startswith("Tokens")] == []


def test_a_malformed_tool_call_does_not_release_held_text() -> None:
    adapter = Adapter()
    convert(adapter, assistant(text("Hold me.")))
    assert convert(adapter, assistant({"type": "tool_use", "name": "Bash"})) == []
    assert meta(checked(adapter.flush())[0])["display_hint"] == "show"


def test_a_tool_input_that_is_not_an_object_reads_as_empty() -> None:
    entries = run(Adapter(), assistant(tool("Bash", "ls")))  # type: ignore[arg-type]
    assert brief(entries)[0] == (
        "tool_use",
        "Bash: {}",
        {"role": "assistant", "tool_name": "Bash", "tool_use_id": "toolu_1", "tool_input": {}},
    )


@pytest.mark.parametrize(
    "frame",
    [
        {"type": "user"},
        {"type": "user", "message": None},
        {"type": "user", "message": {"role": "user"}},
        user({"an": "object"}),
        user(None),
        user(["not a block", 1, {"no": "type"}]),
        user([{"type": "tool_result", "content": "no id"}, {"type": "text", "text": None}]),
        user([{"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {}}]),
    ],
    ids=[
        "no-message",
        "message-null",
        "no-content",
        "content-an-object",
        "content-null",
        "blocks-not-objects",
        "blocks-without-fields",
        "tool-use-block",
    ],
)
def test_malformed_user_frames_show_nothing_but_end_the_message(frame: dict[str, Any]) -> None:
    adapter = Adapter()
    convert(adapter, assistant(text("before")))
    released = convert(adapter, frame)
    assert [(e["content"], meta(e).get("display_hint")) for e in released] == [
        ("before", "show"),
        ("Tokens: 10 in / 2 out", None),
    ]


def test_a_result_with_missing_fields_still_ends_the_turn() -> None:
    entries = convert(Adapter(), {"type": "result"})
    assert brief(entries) == [
        (
            "system",
            "Session complete — 0 turns, $0.0000",
            {"subtype": "result", "num_turns": 0, "cost_usd": 0.0},
        ),
        ("system", "", {"stream_end": True}),
    ]
    odd = convert(Adapter(), result(terminal_reason=["aborted_tools"], num_turns="2"))
    assert [e["content"] for e in odd] == ["Session complete — 0 turns, $0.0500", ""]


@pytest.mark.parametrize(
    "frame",
    [
        {"type": "system"},
        {"type": "system", "subtype": ["init"]},
        system("hook_started", hook_event="PreToolUse"),
        system("task_progress", task_id="t", description="d", usage={}),
    ],
    ids=["no-subtype", "subtype-not-a-string", "hook", "task-progress"],
)
def test_other_system_frames_show_nothing(frame: dict[str, Any]) -> None:
    assert run(Adapter(), frame) == []


def test_metadata_the_wire_cannot_carry_is_reduced() -> None:
    def nested(levels: int) -> Any:
        value: Any = "leaf"
        for _ in range(levels):
            value = [value]
        return value

    # metadata is level 1 and tool_input level 2: `x` adds the levels of its lists.
    deepest = run(Adapter(), assistant(tool("Deep", {"x": nested(62)})))
    assert "tool_input" in meta(deepest[0])
    too_deep = run(Adapter(), assistant(tool("Deep", {"x": nested(63)})))
    assert meta(too_deep[0]) == {"role": "assistant", "tool_name": "Deep", "tool_use_id": "toolu_1"}
    for bad in (float("inf"), float("nan"), 2**64, -(2**63) - 1, {1: "int key"}, (1, 2), {"x"}):
        reduced = run(Adapter(), assistant(tool("Odd", {"x": bad})))
        assert "tool_input" not in meta(reduced[0]), bad
    for fine in (2**64 - 1, -(2**63), 1.5, None, True):
        kept = run(Adapter(), assistant(tool("Fine", {"x": fine})))
        assert meta(kept[0])["tool_input"] == {"x": fine}, fine


def test_a_huge_integer_in_the_usage_is_reduced_to_the_safe_fields() -> None:
    entries = run(Adapter(), assistant(text("x"), usage={"input_tokens": 2**70}))
    usage_line = next(e for e in entries if e["content"].startswith("Tokens"))
    assert usage_line["metadata"] == {}


def test_the_adapter_does_not_change_the_frames() -> None:
    frames = [
        assistant(text("a"), tool("Edit", {"file_path": "/w", "old_string": "x"})),
        user([tool_result("toolu_1", [{"type": "text", "text": "ok"}])]),
        result(),
    ]
    before = copy.deepcopy(frames)
    run(Adapter(diff_allowed=lambda: True), *frames)
    assert frames == before


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3)
    ),
    max_leaves=12,
)
# The keys and type names the adapter reads, so that the fuzz reaches past the first checks.
_KEYS = st.sampled_from(
    [
        *("type", "subtype", "message", "content", "model", "id", "usage", "parent_tool_use_id"),
        *("error", "text", "thinking", "name", "input", "tool_use_id", "is_error", "tools"),
        *("total_cost_usd", "modelUsage", "terminal_reason", "errors", "result", "num_turns"),
    ]
)
_TYPES = st.sampled_from(
    [
        *("assistant", "user", "result", "system", "init", "compact_boundary"),
        *("text", "thinking", "tool_use", "tool_result", "server_tool_use"),
    ]
)
_FRAMES = st.recursive(
    st.dictionaries(_KEYS, _JSON | _TYPES, max_size=5),
    lambda children: st.dictionaries(
        _KEYS, children | st.lists(children, max_size=3) | _JSON | _TYPES, max_size=6
    ),
    max_leaves=10,
)


@settings(max_examples=150, deadline=None)
@given(
    frames=st.lists(_FRAMES.map(lambda f: {**f, "type": f.get("type", "assistant")}), max_size=5)
)
def test_any_json_frame_converts_to_valid_entries_or_none(frames: list[dict[str, Any]]) -> None:
    adapter = Adapter(diff_allowed=lambda: True)
    for frame in frames:
        convert(adapter, frame)
    checked(adapter.flush())


# -- recorded CLI frames ------------------------------------------------------------------------


def _replay(scenario: str, diff: bool = False) -> list[dict[str, Any]]:
    frames = json.loads(RECORDED.read_text(encoding="utf-8"))[scenario]
    assert not [f for f in frames if f.get("type") in CONTROL_TYPES]  # never reach the adapter
    adapter = Adapter(diff_allowed=lambda: diff)
    out: list[dict[str, Any]] = []
    for frame in frames:
        out += convert(adapter, frame)
    return out + checked(adapter.flush())


# The labels (see _label) of each recorded scenario's entries, in order.
RECORDED_CASES: list[tuple[str, str]] = [
    ("reply_with_thinking", "init thinking Tokens text:show result end"),
    (
        "write_allowed",
        "init text:collapse Tokens tool_use diff tool_result text:show Tokens result end",
    ),
    ("write_denied", "init tool_use diff Tokens tool_result! text:show Tokens result end"),
    ("api_errors", "init auth_error end error:server_error end"),
    (
        "exit_plan",
        "init tool_use diff Tokens tool_result tool_use Tokens tool_result Tokens text:show"
        " Tokens result end",
    ),
]


def _label(entry: dict[str, Any]) -> str:
    metadata = meta(entry)
    kind = entry["entryType"]
    if kind == "text":
        return f"text:{metadata.get('display_hint')}"
    if kind == "tool_result":
        return "tool_result!" if metadata.get("is_error") else "tool_result"
    if kind == "error":
        return metadata.get("special") or f"error:{metadata.get('error_type')}"
    if kind == "system":
        if metadata.get("stream_end"):
            return "end"
        if "subtype" in metadata:
            return str(metadata["subtype"])
        return str(entry["content"]).split(":")[0]
    return str(kind)


@pytest.mark.parametrize(("scenario", "labels"), RECORDED_CASES, ids=[c[0] for c in RECORDED_CASES])
def test_recorded_cli_frames(scenario: str, labels: str) -> None:
    assert [_label(e) for e in _replay(scenario, diff=True)] == labels.split()


def test_recorded_exit_plan_hides_the_card_tool() -> None:
    entries = _replay("exit_plan")
    tools = [meta(e).get("tool_name") for e in entries if e["entryType"] == "tool_use"]
    assert tools == ["Write", "ToolSearch"]  # the plan file, the tool search; no ExitPlanMode


def test_recorded_result_carries_the_cost_and_the_context_meter() -> None:
    summary = next(e for e in _replay("write_allowed") if meta(e).get("subtype") == "result")
    assert summary["content"] == "Session complete — 2 turns, $0.1111"
    assert meta(summary)["context_window"] == 1_000_000
    assert meta(summary)["model_usage"][MODEL]["contextWindow"] == 1_000_000


# -- a session host may import the adapter -----------------------------------------------------
