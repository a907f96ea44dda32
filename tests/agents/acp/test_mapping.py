"""The ACP runner's pure parts: tool calls in the gate's vocabulary, options by kind, updates →
entries, session options, and what a replayed history says was received."""

from __future__ import annotations

from typing import Any

import pytest

from bridge.agents.acp.session_state import (
    Replayed,
    SessionOptions,
    matched_inputs,
    user_messages,
)
from bridge.agents.acp.tools import GateCall, choose_option, gate_call
from bridge.agents.acp.updates import UpdateMapper
from bridge.agents.input_log import LoggedInput
from bridge.agents.tool_render import RESULT_MAX_CHARS, TRUNCATED_MARK

TS = "2026-12-02T00:00:00.000Z"


@pytest.mark.parametrize(
    ("call", "expected"),
    [
        # OpenCode's bash, Gemini CLI's run_shell_command: the command is what the gate reads.
        ({"kind": "execute", "rawInput": {"command": "ls -la", "description": "list"}},
         GateCall("Bash", {"command": "ls -la"})),
        ({"kind": "execute", "rawInput": {"command": ["git", "push", "--force"]}},
         GateCall("Bash", {"command": "git push --force"})),
        # Gemini CLI sends no raw input: the title is its command line.
        ({"kind": "execute", "title": "rm -rf /"}, GateCall("Bash", {"command": "rm -rf /"})),
        ({"kind": "execute"}, GateCall("Bash", {})),
        ({"kind": "edit", "rawInput": {"filePath": "/w/a.py", "oldString": "a", "newString": "b"}},
         GateCall("Edit", {"file_path": "/w/a.py", "old_string": "a", "new_string": "b"})),
        ({"kind": "edit", "rawInput": {"filePath": "/w/a.py", "content": "x"}},
         GateCall("Write", {"file_path": "/w/a.py", "content": "x"})),
        ({"kind": "edit", "content": [{"type": "diff", "path": "/w/b", "oldText": None, "newText": "n"}]},
         GateCall("Write", {"file_path": "/w/b", "content": "n"})),
        ({"kind": "edit", "locations": [{"path": "/etc/passwd"}],
          "content": [{"type": "diff", "path": "/etc/passwd", "oldText": "o", "newText": "n"}]},
         GateCall("Edit", {"file_path": "/etc/passwd", "old_string": "o", "new_string": "n"})),
        ({"kind": "edit"}, GateCall("Edit", {})),
        ({"kind": "delete", "rawInput": {"path": "/w/old"}}, GateCall("Write", {"file_path": "/w/old"})),
        ({"kind": "read", "rawInput": {"filePath": "/w/a"}}, GateCall("Read", {"file_path": "/w/a"})),
        ({"kind": "search", "rawInput": {"pattern": "TODO", "path": "/w"}},
         GateCall("Grep", {"pattern": "TODO", "path": "/w"})),
        ({"kind": "fetch", "rawInput": {"url": "https://x"}}, GateCall("WebFetch", {"url": "https://x"})),
        ({"kind": "think", "title": "thinking"}, GateCall("Task", {"description": "thinking"})),
        ({"kind": "other", "title": "skill", "rawInput": {"name": "s"}}, GateCall("skill", {"name": "s"})),
        ({}, GateCall("tool", {})),
    ],
)  # fmt: skip
def test_gate_call(call: dict[str, Any], expected: GateCall) -> None:
    assert gate_call(call) == expected


OPENCODE = [
    {"optionId": "once", "kind": "allow_once", "name": "Allow once"},
    {"optionId": "always", "kind": "allow_always", "name": "Always allow"},
    {"optionId": "reject", "kind": "reject_once", "name": "Reject"},
]
GEMINI = [
    {"optionId": "proceed_always", "kind": "allow_always", "name": "Always"},
    {"optionId": "proceed_once", "kind": "allow_once", "name": "Once"},
    {"optionId": "cancel", "kind": "reject_once", "name": "Cancel"},
]


def test_options_are_chosen_by_kind_never_always() -> None:
    assert choose_option(OPENCODE, allow=True) == "once"
    assert choose_option(GEMINI, allow=True) == "proceed_once"
    assert choose_option(GEMINI, allow=False) == "cancel"
    only_always = [
        {"optionId": "a", "kind": "allow_always"},
        {"optionId": "r", "kind": "reject_always"},
    ]
    assert choose_option(only_always, allow=True) is None  # never `allow_always`: cancelled
    assert choose_option(only_always, allow=False) == "r"


def chunk(kind: str, text: str, message_id: str | None = None) -> dict[str, Any]:
    update: dict[str, Any] = {"sessionUpdate": kind, "content": {"type": "text", "text": text}}
    if message_id is not None:
        update["messageId"] = message_id
    return update


def feed(mapper: UpdateMapper, *updates: dict[str, Any]) -> list[dict[str, Any]]:
    return [entry for update in updates for entry in mapper.feed(update, TS)]


def test_chunks_join_per_message_and_flush_on_another_kind() -> None:
    mapper = UpdateMapper(lambda: False)
    mapper.model = "mock/m"
    out = feed(
        mapper,
        chunk("agent_thought_chunk", "let me "),
        chunk("agent_thought_chunk", "think"),
        chunk("agent_message_chunk", "Hel", "m1"),
        chunk("agent_message_chunk", "lo", "m1"),
        chunk("agent_message_chunk", "Next", "m2"),
    )
    assert [(e["entryType"], e["content"]) for e in out] == [
        ("thinking", "let me think"),
        ("text", "Hello"),
    ]
    end = mapper.end_turn("end_turn", {"inputTokens": 1}, TS)
    assert [(e["entryType"], e["content"]) for e in end] == [
        ("text", "Next"),
        ("system", "Turn complete"),
        ("system", ""),
    ]
    assert out[1]["metadata"] == {"role": "assistant", "model": "mock/m"}
    assert end[1]["metadata"]["usage"] == {"inputTokens": 1}


def test_a_tool_call_is_shown_once_its_input_is_known_then_its_result_cut() -> None:
    mapper = UpdateMapper(lambda: False)
    # OpenCode's pending call carries only its cwd: not shown until it runs (or is asked about).
    pending = {"sessionUpdate": "tool_call", "toolCallId": "c1", "title": "bash", "kind": "execute",
               "status": "pending", "rawInput": {"cwd": "/w"}}  # fmt: skip
    assert feed(mapper, pending) == []
    running = {"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "in_progress",
               "rawInput": {"command": "ls"}}  # fmt: skip
    (use,) = feed(mapper, running)
    assert (use["entryType"], use["content"]) == ("tool_use", "Bash: ls")
    assert use["metadata"]["tool_input"] == {"command": "ls"}
    done = {"sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "completed",
            "content": [{"type": "content", "content": {"type": "text", "text": "x" * 3000}}]}  # fmt: skip
    (result,) = feed(mapper, done)
    assert result["entryType"] == "tool_result"
    assert result["content"] == "x" * RESULT_MAX_CHARS + TRUNCATED_MARK
    assert feed(mapper, done) == []  # a repeated update adds nothing


def test_raw_output_is_the_result_when_there_is_no_content() -> None:
    mapper = UpdateMapper(lambda: False)
    out = feed(mapper, {"sessionUpdate": "tool_call", "toolCallId": "c", "kind": "execute",
                        "status": "failed", "rawInput": {"command": "false"},
                        "rawOutput": {"output": "boom"}})  # fmt: skip
    assert [e["entryType"] for e in out] == ["tool_use", "tool_result"]
    assert out[1]["content"] == "boom" and out[1]["metadata"]["is_error"] is True


def test_diff_content_becomes_a_diff_entry_only_when_phones_can_show_it() -> None:
    call = {"sessionUpdate": "tool_call", "toolCallId": "c", "kind": "edit", "status": "in_progress",
            "rawInput": {"filePath": "/w/a"},
            "content": [{"type": "diff", "path": "/w/a", "oldText": "old", "newText": "new"}]}  # fmt: skip
    assert [e["entryType"] for e in feed(UpdateMapper(lambda: False), call)] == ["tool_use"]
    out = feed(UpdateMapper(lambda: True), call)
    assert [e["entryType"] for e in out] == ["tool_use", "diff"]
    assert out[1]["diff"]["lines"] == [
        {"type": "del", "text": "old"},
        {"type": "add", "text": "new"},
    ]


def test_a_cancelled_turn_closes_its_open_calls_before_stream_end() -> None:
    mapper = UpdateMapper(lambda: False)
    feed(mapper, {"sessionUpdate": "tool_call", "toolCallId": "c", "kind": "execute",
                  "status": "in_progress", "rawInput": {"command": "sleep 9"}})  # fmt: skip
    end = mapper.end_turn("cancelled", None, TS)
    assert [(e["entryType"], e["content"]) for e in end] == [
        ("tool_result", "Interrupted"),
        ("system", "Interrupted"),
        ("system", ""),
    ]


def test_usage_feeds_the_context_meter_of_the_result() -> None:
    mapper = UpdateMapper(lambda: False)
    feed(mapper, {"sessionUpdate": "usage_update", "used": 50_000, "size": 200_000,
                  "cost": {"amount": 0.25, "currency": "USD"}})  # fmt: skip
    result = mapper.end_turn("end_turn", None, TS)[0]
    assert result["metadata"]["context_window"] == 200_000
    assert result["metadata"]["context_percentage"] == 25
    assert result["metadata"]["total_cost_usd"] == 0.25


def test_an_error_replaces_the_result() -> None:
    end = UpdateMapper(lambda: False).end_turn(None, None, TS, error="model unavailable")
    assert [(e["entryType"], e["content"]) for e in end] == [
        ("error", "model unavailable"),
        ("system", ""),
    ]


def test_session_options_from_config_options_and_modes() -> None:
    options = SessionOptions()
    options.read_session({
        "modes": {"currentModeId": "default", "availableModes": [{"id": "default", "name": "D"},
                                                                 {"id": "plan", "name": "P"}]},
        "configOptions": [{"id": "model", "name": "Model", "type": "select", "category": "model",
                           "currentValue": "a/1",
                           "options": [{"value": "a/1", "name": "One"},
                                       {"group": "g", "name": "G", "options": [{"value": "b/2", "name": "Two"}]}]}],
    })  # fmt: skip
    assert options.models == [("a/1", "One"), ("b/2", "Two")]
    assert (options.model, options.model_config_id) == ("a/1", "model")
    assert options.modes == ["default", "plan"] and options.initial_mode == "default"


def test_user_messages_split_on_other_updates_and_message_ids() -> None:
    replay = [
        Replayed(True, None, "fir"), Replayed(True, None, "st"), Replayed(False),
        Replayed(True, "a", "second"), Replayed(True, "b", "third"),
    ]  # fmt: skip
    assert user_messages(replay) == ["first", "second", "third"]


def test_user_messages_leave_out_the_agents_own_context() -> None:
    # Gemini CLI 0.61's rare successful session/load: its context block, then the prompt, both
    # chunks without a messageId.
    replay = [
        Replayed(True, None, "<session_context>\nThis is the Gemini CLI.\n</session_context>"),
        Replayed(True, None, "first prompt"), Replayed(False),
        Replayed(True, None, "  <hook_context>x</hook_context>"), Replayed(True, None, "second"),
    ]  # fmt: skip
    assert user_messages(replay) == ["first prompt", "second"]


def test_matched_inputs_skip_what_was_logged_but_never_sent() -> None:
    logged = [LoggedInput("u1", "one"), LoggedInput("u2", "two"), LoggedInput("u3", "three"),
              LoggedInput("u2", "two")]  # fmt: skip
    assert matched_inputs(logged, ["one", "three"]) == {"u1", "u3"}
    assert matched_inputs(logged, []) == set()
    # An agent that stores something else than what it was sent: matched by position.
    assert matched_inputs(logged, ["ONE", "TWO"]) == {"u1", "u2"}


def test_a_permission_request_adds_to_the_call_and_never_erases_its_target() -> None:
    """OpenCode's asks about a read outside the project, as measured: `external_directory`
    (kind other, the folder as title and input), then `read` with no input and no location.
    The gate must still judge the read of the file the call names."""
    mapper = UpdateMapper(lambda: False)
    feed(mapper, {"sessionUpdate": "tool_call", "toolCallId": "r", "title": "read", "kind": "read",
                  "status": "pending", "locations": [], "rawInput": {}})  # fmt: skip
    feed(mapper, {"sessionUpdate": "tool_call_update", "toolCallId": "r", "kind": "read",
                  "status": "in_progress", "title": "read", "locations": [{"path": "/h/.ssh/k"}],
                  "rawInput": {"filePath": "/h/.ssh/k"}})  # fmt: skip
    directory = {"toolCallId": "r", "kind": "other", "status": "pending", "title": "/h/.ssh",
                 "locations": [{"path": "/h/.ssh/k"}, {"path": "/h/.ssh"}],
                 "rawInput": {"filepath": "/h/.ssh/k", "parentDir": "/h/.ssh"}}  # fmt: skip
    state = mapper.tool_state(directory)
    assert state is not None
    assert state.call == GateCall("Read", {"file_path": "/h/.ssh/k"})
    assert state.raw["locations"] == [{"path": "/h/.ssh/k"}, {"path": "/h/.ssh"}]
    read = {"toolCallId": "r", "kind": "read", "status": "pending", "title": "read",
            "locations": [], "rawInput": {}}  # fmt: skip
    again = mapper.tool_state(read)
    assert again is state and state.call == GateCall("Read", {"file_path": "/h/.ssh/k"})


def test_a_permission_request_for_an_unannounced_call_is_the_call() -> None:
    """Gemini CLI announces no call before it asks: the request alone is what the gate judges,
    and a request's specific kind replaces a vaguer one."""
    mapper = UpdateMapper(lambda: False)
    ask = {"toolCallId": "g", "kind": "execute", "status": "pending", "title": "rm -rf ~"}
    state = mapper.tool_state(ask)
    assert state is not None and state.call == GateCall("Bash", {"command": "rm -rf ~"})
    feed(mapper, {"sessionUpdate": "tool_call", "toolCallId": "o", "title": "tool", "kind": "other",
                  "status": "pending", "rawInput": {}})  # fmt: skip
    edit = mapper.tool_state({"toolCallId": "o", "kind": "edit", "rawInput": {"filePath": "/w/a"}})
    assert edit is not None and edit.call == GateCall("Write", {"file_path": "/w/a", "content": ""})


def test_a_permission_request_names_the_command_an_announced_call_left_out() -> None:
    """An agent that announces a shell call by its tool's name and asks with the command line
    as the title (Gemini CLI's way of naming a command): the gate judges the command."""
    mapper = UpdateMapper(lambda: False)
    feed(mapper, {"sessionUpdate": "tool_call", "toolCallId": "s", "title": "Shell",
                  "kind": "execute", "status": "pending"})  # fmt: skip
    state = mapper.tool_state({"toolCallId": "s", "kind": "execute", "title": "rm -rf ~"})
    assert state is not None and state.call == GateCall("Bash", {"command": "rm -rf ~"})
