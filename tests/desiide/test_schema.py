"""The Desiide schema: strict requests, tolerant results, exact dumps, safe error messages."""

from __future__ import annotations

import importlib
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from bridge.desiide.schema import methods as schema
from bridge.desiide.schema.methods import (
    ALL_FAILURE_REASONS,
    METHODS,
    NOTIFICATION_METHODS,
    PACK_STATES,
    RESULTS,
    REVERSE_METHODS,
    TASK_EVENT_TYPES,
    ApprovalRequiredEvent,
    AvailableModel,
    Budget,
    CostRouteState,
    DecisionMadeEvent,
    DecisionRecord,
    DesiideConfig,
    EditFile,
    EditProposal,
    EditProposedEvent,
    EditsReportParams,
    ErrorEvent,
    FailureReason,
    FileMeta,
    InitializeParams,
    JevPreviewResult,
    KnownPack,
    LogParams,
    ModelErrorKind,
    ModelsTestResult,
    NoulResult,
    OkResult,
    RequestModel,
    RiskGateContext,
    RiskGateState,
    ScoreResult,
    SecretsGetParams,
    SecretsGetResult,
    StateChangedEvent,
    TaskInput,
    TaskState,
    TaskSummary,
    TextDeltaEvent,
    ToolCall,
    ToolCallFinishedEvent,
    ToolCallStartedEvent,
    ToolError,
    ToolErrorKind,
    ToolName,
    ToolResult,
    UnknownTaskEvent,
    Usage,
    UsageEvent,
    WireModel,
    WorkflowSelectState,
    model_error_reason,
    parse_task_event,
    validation_message,
)

RAW_KEY = "sk-ant-api03-THIS-IS-A-RAW-KEY"


def message_for(model: type[BaseModel], data: Any) -> str:
    with pytest.raises(ValidationError) as caught:
        model.model_validate(data)
    return validation_message(caught.value)


def task(**overrides: Any) -> dict[str, Any]:
    return {"kind": "edit", "instruction": "rename foo to bar", **overrides}


# --- the tables -------------------------------------------------------------------------------------

SEED_METHODS = {
    "initialize",
    "task.create",
    "task.cancel",
    "task.list",
    "task.approve",
    "task.reject",
    "edits.report",
    "models.list",
    "models.test",
    "jev.test",
    "jev.preview",
    "decisions.list",
    "decisions.replay",
    "config.update",
    "health.ping",
}


def test_the_method_table_is_the_seeds() -> None:
    assert set(METHODS) == SEED_METHODS
    assert set(RESULTS) == SEED_METHODS
    assert set(REVERSE_METHODS) == {"secrets.get"}
    assert NOTIFICATION_METHODS == ("task.event", "log")


@pytest.mark.parametrize("method", sorted(METHODS))
def test_every_request_is_strict(method: str) -> None:
    model = METHODS[method]
    assert issubclass(model, RequestModel)
    with pytest.raises(ValidationError) as caught:
        model.model_validate({"unknownParam": 1})
    assert any(
        e["type"] == "extra_forbidden" and e["loc"] == ("unknownParam",)
        for e in caught.value.errors()
    )


@pytest.mark.parametrize("method", sorted(RESULTS))
def test_every_result_is_tolerant(method: str) -> None:
    assert issubclass(RESULTS[method], WireModel)
    assert RESULTS[method].model_config.get("extra") == "ignore"


def test_schema_reexports_its_parts() -> None:
    union: set[str] = set()
    for part in ("base", "task", "events", "jev", "config"):
        union |= set(importlib.import_module(f"bridge.desiide.schema.{part}").__all__)
    assert union <= set(schema.__all__)
    assert all(hasattr(schema, name) for name in schema.__all__)


# --- TaskInput ------------------------------------------------------------------------------------


def test_task_input_defaults() -> None:
    parsed = TaskInput.model_validate({"kind": "ask", "instruction": "why?"})
    assert parsed.allowedTools == [
        ToolName.READ_FILE,
        ToolName.LIST_FILES,
        ToolName.SEARCH,
        ToolName.PROPOSE_EDIT,
    ]
    assert parsed.budget == Budget(
        maxIterations=8, maxToolCalls=40, maxTokens=200_000, wallClockMs=600_000
    )
    assert parsed.context is None and parsed.success is None and parsed.preference is None


def test_task_input_full() -> None:
    parsed = TaskInput.model_validate(
        task(
            kind="fix",
            context={
                "files": ["./src//a.py"],
                "selection": {"path": "src/a.py", "startLine": 3, "endLine": 3},
                "notes": "n",
            },
            allowedTools=["run_command"],
            success={"testsPass": True},
            budget={"maxIterations": 2.0},
            preference="best",
            workflowOverride="plan_then_edit@1",
        )
    )
    assert parsed.context is not None and parsed.context.files == ["src/a.py"]
    assert parsed.allowedTools == [ToolName.RUN_COMMAND]
    assert parsed.budget.maxIterations == 2 and parsed.budget.maxToolCalls == 40


BUDGET_BOUNDS = [
    ("maxIterations", 1, 100),
    ("maxToolCalls", 1, 1_000),
    ("maxTokens", 1, 10_000_000),
    ("wallClockMs", 1_000, 86_400_000),
]


@pytest.mark.parametrize(("field", "low", "high"), BUDGET_BOUNDS)
def test_budget_bounds_are_exact(field: str, low: int, high: int) -> None:
    for ok in (low, high):
        assert getattr(TaskInput.model_validate(task(budget={field: ok})).budget, field) == ok
    for bad in (low - 1, high + 1):
        assert f"budget.{field}:" in message_for(TaskInput, task(budget={field: bad}))


TASK_INPUT_ERRORS = [
    ({"instruction": ""}, "instruction: String should have at least 1 character"),
    ({"instruction": " \n\t"}, "instruction: must not be empty or only whitespace"),
    ({"instruction": "x" * 100_001}, "instruction: String should have at most 100000"),
    ({"instruction": 7}, "instruction: Input should be a valid string"),
    ({"kind": "refactor"}, "kind: Input should be 'ask', 'edit' or 'fix'"),
    ({"kind": None}, "kind: Input should be 'ask', 'edit' or 'fix'"),
    ({"budget": {"maxTokens": "200000"}}, "budget.maxTokens: Input should be a valid integer"),
    ({"budget": {"maxTokens": 1.5}}, "budget.maxTokens: Input should be a valid integer"),
    ({"budget": {"maxTokens": True}}, "budget.maxTokens: Input should be a valid integer"),
    ({"budget": {"turns": 3}}, "budget.turns: unknown param"),
    ({"success": {"testsPass": 1}}, "success.testsPass: Input should be a valid boolean"),
    ({"success": {"testsPass": "true"}}, "success.testsPass: Input should be a valid boolean"),
    ({"allowedTools": ["read_file", "read_file"]}, "allowedTools: must not name a tool twice"),
    ({"allowedTools": ["Bash"]}, "allowedTools[0]: Input should be 'read_file'"),
    ({"context": {"files": ["/etc/passwd"]}}, "context.files[0]: must be relative"),
    ({"context": {"files": ["a/../../b"]}}, "context.files[0]: must not contain '..'"),
    (
        {"context": {"selection": {"path": "a", "startLine": 4, "endLine": 3}}},
        "context.selection: endLine must not come before startLine",
    ),
    (
        {"context": {"selection": {"path": "a", "startLine": 0, "endLine": 3}}},
        "context.selection.startLine: Input should be greater than or equal to 1",
    ),
    ({"context": {"files": ["a"] * 501}}, "context.files: List should have at most 500 items"),
    ({"context": {"notes": "x" * 20_001}}, "context.notes: String should have at most 20000"),
    ({"preference": "fast"}, "preference: Input should be 'cheap', 'balanced' or 'best'"),
    ({"workflowOverride": "has space"}, "workflowOverride: String should match pattern"),
    ({"extra": 1}, "extra: unknown param"),
]


@pytest.mark.parametrize(
    ("override", "expected"), TASK_INPUT_ERRORS, ids=[e[1][:40] for e in TASK_INPUT_ERRORS]
)
def test_task_input_errors_name_the_field(override: dict[str, Any], expected: str) -> None:
    assert expected in message_for(TaskInput, task(**override))


def test_missing_fields_are_required() -> None:
    assert message_for(TaskInput, {}) == ("invalid params: kind: required; instruction: required")


def test_optional_params_accept_null_as_absent() -> None:
    parsed = TaskInput.model_validate(task(context=None, preference=None, success=None))
    assert parsed.context is None


def test_an_empty_tool_list_is_allowed() -> None:
    assert TaskInput.model_validate(task(allowedTools=[])).allowedTools == []


def test_instruction_at_the_limit() -> None:
    assert len(TaskInput.model_validate(task(instruction="x" * 100_000)).instruction) == 100_000


# --- validation_message ---------------------------------------------------------------------------


def test_the_message_lists_three_problems_then_counts() -> None:
    text = message_for(TaskInput, {"a": 1, "b": 2, "c": 3, "d": 4, "e": 5})
    assert text.startswith("invalid params: ")
    assert text.count(": unknown param") + text.count(": required") == 3
    assert text.endswith("and 4 more")


def test_the_message_never_echoes_values() -> None:
    text = message_for(
        TaskInput, task(instruction=RAW_KEY * 5000, context={"notes": RAW_KEY * 2000})
    )
    assert RAW_KEY not in text


def test_long_keys_are_cut() -> None:
    text = message_for(TaskInput, task(**{"k" * 500: 1}))
    assert "k" * 64 not in text and "…: unknown param" in text


# --- DesiideConfig --------------------------------------------------------------------------------


def model_cfg(**overrides: Any) -> dict[str, Any]:
    return {
        "id": "fast",
        "provider": "anthropic",
        "baseUrl": "https://api.anthropic.com",
        "model": "claude-haiku-4-5",
        **overrides,
    }


def jev_cfg(**overrides: Any) -> dict[str, Any]:
    return {"baseUrl": "https://judge.example", "model": "judge-1", **overrides}


def test_a_full_config() -> None:
    parsed = DesiideConfig.model_validate(
        {
            "models": [
                model_cfg(apiKey="secret:anthropic", costTier="low", contextTokens=200_000),
                model_cfg(id="local", provider="ollama", baseUrl="http://192.168.1.5:11434/"),
            ],
            "roles": {"edit": "fast", "ask": "claude:sonnet"},
            "jev": jev_cfg(apiKey="secret:judge", riskGate=True),
            "gating": {"strict": True},
        }
    )
    assert parsed.models[1].baseUrl == "http://192.168.1.5:11434"
    assert parsed.jev is not None and parsed.jev.timeoutMs == 15_000
    assert parsed.gating.strict is True


def test_an_empty_config_takes_the_defaults() -> None:
    parsed = DesiideConfig.model_validate({})
    assert parsed.models == [] and parsed.roles == {} and parsed.jev is None
    assert parsed.gating.strict is False


RAW_KEY_CASES = [
    {"models": [model_cfg(apiKey=RAW_KEY)]},
    {"jev": jev_cfg(apiKey=RAW_KEY)},
    {"models": [model_cfg(apiKey="Bearer " + RAW_KEY)]},
]


@pytest.mark.parametrize("config", RAW_KEY_CASES)
def test_a_raw_key_is_refused_without_being_quoted(config: dict[str, Any]) -> None:
    with pytest.raises(ValidationError) as caught:
        DesiideConfig.model_validate(config)
    text = validation_message(caught.value)
    assert "apiKey: API keys are accepted only as secret:<name> references" in text
    assert RAW_KEY not in text and RAW_KEY not in str(caught.value)


CONFIG_ERRORS = [
    ({"models": [model_cfg(apiKey="secret:")]}, "models[0].apiKey: the secret name must be"),
    ({"models": [model_cfg(apiKey="secret:a b")]}, "models[0].apiKey: the secret name must be"),
    (
        {"models": [model_cfg(baseUrl="http://api.example", apiKey="secret:k")]},
        "must be https://",
    ),
    ({"jev": jev_cfg(baseUrl="http://judge.example", apiKey="secret:k")}, "must be https://"),
    ({"models": [model_cfg(baseUrl="ftp://x")]}, "models[0].baseUrl: must be an http(s) URL"),
    ({"models": [model_cfg(baseUrl="https://u:p@x")]}, "credentials inside the URL"),
    ({"models": [model_cfg(baseUrl="https://x/?a=1")]}, "query or fragment"),
    ({"models": [model_cfg(baseUrl="https://x:99999")]}, "not a valid URL"),
    ({"models": [model_cfg(), model_cfg()]}, "models: model ids must be unique"),
    ({"models": [model_cfg(id="claude:mine")]}, "models[0].id: the prefixes claude:"),
    ({"models": [model_cfg(id="a b")]}, "models[0].id: must be 1-100 of A-Z a-z 0-9 . _ -"),
    ({"models": [model_cfg(provider="gemini")]}, "models[0].provider: Input should be"),
    ({"models": [model_cfg(model=" ")]}, "models[0].model: String should match pattern"),
    ({"models": [model_cfg()] * 101}, "models: List should have at most 100 items"),
    ({"roles": {"Edit": "fast"}}, "roles.Edit.[key]: String should match pattern"),
    ({"roles": {f"r{i}": "m" for i in range(21)}}, "roles: Dictionary should have at most 20"),
    ({"jev": jev_cfg(timeoutMs=999)}, "jev.timeoutMs: Input should be greater than or equal"),
    ({"jev": jev_cfg(timeoutMs=120_001)}, "jev.timeoutMs: Input should be less than or equal"),
    ({"jev": {"model": "x"}}, "jev.baseUrl: required"),
    ({"gating": {"strict": "yes"}}, "gating.strict: Input should be a valid boolean"),
    ({"gating": {"strict": False, "mode": 1}}, "gating.mode: unknown param"),
]


@pytest.mark.parametrize(
    ("config", "expected"), CONFIG_ERRORS, ids=[c[1][:40] for c in CONFIG_ERRORS]
)
def test_config_errors_name_the_field(config: dict[str, Any], expected: str) -> None:
    assert expected in message_for(DesiideConfig, config)


@pytest.mark.parametrize(
    "url", ["http://localhost:8080", "http://127.0.0.1:11434", "http://[::1]:1234"]
)
def test_a_keyed_loopback_endpoint_may_be_plain_http(url: str) -> None:
    DesiideConfig.model_validate({"models": [model_cfg(baseUrl=url, apiKey="secret:k")]})


# --- initialize and the other params --------------------------------------------------------------


def test_initialize_normalizes_and_checks_roots() -> None:
    parsed = InitializeParams.model_validate(
        {
            "protocolVersion": "1.3.0",
            "client": {"name": "desiide", "version": "0.4.1"},
            "workspaceRoots": ["file:///home/me/a%20b/", "/srv/x/../y"],
        }
    )
    assert parsed.workspaceRoots == ["/home/me/a b", "/srv/y"]
    text = message_for(
        InitializeParams,
        {"protocolVersion": "1.0", "client": {"name": "", "version": "1"}, "workspaceRoots": ["x"]},
    )
    assert "protocolVersion: String should match pattern" in text
    assert "client.name: String should have at least 1 character" in text
    assert "workspaceRoots[0]: must be an absolute path" in text


def test_edits_report_paths_are_checked_and_unique() -> None:
    base = {"taskId": "t", "proposalId": "p"}
    ok = EditsReportParams.model_validate(
        {**base, "files": [{"path": "./a", "status": "applied"}, {"path": "b", "status": "stale"}]}
    )
    assert [f.path for f in ok.files] == ["a", "b"]
    dup = {
        **base,
        "files": [{"path": "a", "status": "applied"}, {"path": "./a", "status": "rejected"}],
    }
    assert "files: must not report a path twice" in message_for(EditsReportParams, dup)
    assert "files: List should have at least 1 item" in message_for(
        EditsReportParams, {**base, "files": []}
    )
    assert "files[0].status: Input should be 'applied', 'rejected' or 'stale'" in message_for(
        EditsReportParams, {**base, "files": [{"path": "a", "status": "done"}]}
    )


VALID_PARAMS: dict[str, dict[str, Any]] = {
    "initialize": {
        "protocolVersion": "1.0.0",
        "client": {"name": "x", "version": "1"},
        "workspaceRoots": [],
    },
    "task.create": task(),
    "task.cancel": {"taskId": "task-1"},
    "task.list": {},
    "task.approve": {"taskId": "t", "approvalId": "a", "scope": "task"},
    "task.reject": {"taskId": "t", "approvalId": "a", "reason": "no"},
    "edits.report": {
        "taskId": "t",
        "proposalId": "p",
        "files": [{"path": "a", "status": "applied"}],
    },
    "models.list": {"discover": True},
    "models.test": {"modelId": "claude:sonnet"},
    "jev.test": {},
    "jev.preview": {"pack": "risk_gate@1"},
    "decisions.list": {"taskId": "t", "pack": "cost_route@1", "outcome": "ask", "limit": 500},
    "decisions.replay": {"id": 7},
    "config.update": {},
    "health.ping": {},
}


@pytest.mark.parametrize("method", sorted(VALID_PARAMS))
def test_every_method_has_a_valid_example(method: str) -> None:
    assert set(VALID_PARAMS) == set(METHODS)
    METHODS[method].model_validate(VALID_PARAMS[method])


PARAM_ERRORS = [
    (
        "task.approve",
        {"taskId": "t", "approvalId": "a", "scope": "forever"},
        "scope: Input should be 'once' or 'task'",
    ),
    ("task.cancel", {"taskId": ""}, "taskId: String should have at least 1 character"),
    ("task.cancel", {"taskId": 5}, "taskId: Input should be a valid string"),
    (
        "task.reject",
        {"taskId": "t", "approvalId": "a", "reason": "x" * 2001},
        "reason: String should have at most 2000",
    ),
    ("decisions.list", {"limit": 501}, "limit: Input should be less than or equal to 500"),
    ("decisions.list", {"limit": 0}, "limit: Input should be greater than or equal to 1"),
    ("decisions.list", {"pack": "x@1"}, "pack: Input should be"),
    ("decisions.replay", {"id": 0}, "id: Input should be greater than 0"),
    ("decisions.replay", {"id": "7"}, "id: Input should be a valid integer"),
    ("jev.preview", {}, "pack: required"),
    ("models.list", {"discover": "yes"}, "discover: Input should be a valid boolean"),
]


@pytest.mark.parametrize(
    ("method", "params", "expected"), PARAM_ERRORS, ids=[e[2][:40] for e in PARAM_ERRORS]
)
def test_param_errors(method: str, params: dict[str, Any], expected: str) -> None:
    assert expected in message_for(METHODS[method], params)


def test_decisions_list_defaults() -> None:
    parsed = METHODS["decisions.list"].model_validate({})
    assert parsed.model_dump() == {
        "taskId": None,
        "pack": None,
        "outcome": None,
        "limit": 50,
        "cursor": None,
    }


# --- results and records --------------------------------------------------------------------------


def dump(model: BaseModel) -> Any:
    return model.model_dump(mode="json", exclude_none=True)


def test_results_leave_out_absent_fields() -> None:
    summary = TaskSummary(
        id="task-1", kind="ask", state=TaskState.QUEUED, createdAt="2025-01-01T00:00:00Z"
    )
    assert dump(summary) == {
        "id": "task-1",
        "kind": "ask",
        "state": "queued",
        "createdAt": "2025-01-01T00:00:00Z",
    }
    assert dump(OkResult()) == {"ok": True}
    assert dump(ModelsTestResult(ok=False, error={"kind": "auth", "message": "m"})) == {
        "ok": False,
        "error": {"kind": "auth", "message": "m"},
    }


def test_a_deleted_file_keeps_its_null_content() -> None:
    proposal = EditProposal(
        id="p",
        taskId="t",
        summary="s",
        files=[EditFile(path="old.py", content=None), EditFile(path="n.py", content="x")],
    )
    assert dump(proposal)["files"] == [
        {"path": "old.py", "content": None},
        {"path": "n.py", "content": "x"},
    ]


def test_records_check_paths_when_built() -> None:
    with pytest.raises(ValidationError):
        FileMeta(path="../x", sensitive=False)


def test_results_read_back_tolerantly() -> None:
    record = DecisionRecord.model_validate(
        {"id": 3, "at": "t", "tool": "Bash", "outcome": "ask", "reasons": [], "newField": {"x": 1}}
    )
    assert dump(record) == {"id": 3, "at": "t", "tool": "Bash", "outcome": "ask", "reasons": []}


def test_secrets_get() -> None:
    assert dump(SecretsGetParams(ref="secret:anthropic")) == {"ref": "secret:anthropic"}
    with pytest.raises(ValidationError):
        SecretsGetParams(ref=RAW_KEY)
    result = SecretsGetResult.model_validate({"value": RAW_KEY})
    assert result.value is not None and result.value.get_secret_value() == RAW_KEY
    assert RAW_KEY not in repr(result) and RAW_KEY not in str(result)
    assert SecretsGetResult.model_validate({"value": None}).value is None
    assert dump(SecretsGetResult(value=None)) == {"value": None}
    with pytest.raises(ValidationError):
        SecretsGetResult.model_validate({})


def test_failure_reasons() -> None:
    assert model_error_reason(ModelErrorKind.RATE_LIMIT) == "model_error:rate_limit"
    assert len(ALL_FAILURE_REASONS) == len(FailureReason) + len(ModelErrorKind)
    assert "budget:wallClockMs" in ALL_FAILURE_REASONS
    assert "model_error:unknown" in ALL_FAILURE_REASONS


# --- task events ----------------------------------------------------------------------------------

BASE = {"taskId": "task-1", "seq": 4, "ts": "2025-01-01T00:00:00.000Z"}
CALL = ToolCall(id="c1", tool="run_command", args={"command": "make test"})

EVENTS: list[tuple[BaseModel, dict[str, Any]]] = [
    (
        StateChangedEvent(**BASE, from_=None, to=TaskState.QUEUED),
        {"type": "state_changed", "from": None, "to": "queued"},
    ),
    (
        StateChangedEvent(
            **BASE, from_=TaskState.RUNNING, to=TaskState.FAILED, reason="loop_detected"
        ),
        {"type": "state_changed", "from": "running", "to": "failed", "reason": "loop_detected"},
    ),
    (
        TextDeltaEvent(**BASE, messageId="m", delta="hi"),
        {"type": "text_delta", "messageId": "m", "delta": "hi"},
    ),
    (
        ToolCallStartedEvent(**BASE, call=CALL),
        {
            "type": "tool_call_started",
            "call": {"id": "c1", "tool": "run_command", "args": {"command": "make test"}},
        },
    ),
    (
        ToolCallFinishedEvent(
            **BASE,
            result=ToolResult(
                callId="c1",
                ok=False,
                error=ToolError(
                    kind=ToolErrorKind.BLOCKED, message="no", reasons=["deny_list:rm_rf"]
                ),
            ),
        ),
        {
            "type": "tool_call_finished",
            "result": {
                "callId": "c1",
                "ok": False,
                "error": {"kind": "blocked", "message": "no", "reasons": ["deny_list:rm_rf"]},
            },
        },
    ),
    (
        EditProposedEvent(
            **BASE,
            proposal=EditProposal(
                id="p", taskId="task-1", summary="s", files=[EditFile(path="a", content="x")]
            ),
            files=[FileMeta(path="a", sensitive=False, bytesAfter=1, created=True)],
        ),
        {
            "type": "edit_proposed",
            "proposal": {
                "id": "p",
                "taskId": "task-1",
                "summary": "s",
                "files": [{"path": "a", "content": "x"}],
            },
            "files": [{"path": "a", "sensitive": False, "bytesAfter": 1, "created": True}],
        },
    ),
    (
        ApprovalRequiredEvent(
            **BASE, approvalId="a1", call=CALL, reasons=["privileged"], decisionId=9, paths=[]
        ),
        {
            "type": "approval_required",
            "approvalId": "a1",
            "call": {"id": "c1", "tool": "run_command", "args": {"command": "make test"}},
            "outcome": "confirm",
            "reasons": ["privileged"],
            "decisionId": 9,
            "paths": [],
        },
    ),
    (
        DecisionMadeEvent(
            **BASE, decision=DecisionRecord(id=9, at="t", tool="Bash", outcome="ask", reasons=[])
        ),
        {
            "type": "decision_made",
            "decision": {"id": 9, "at": "t", "tool": "Bash", "outcome": "ask", "reasons": []},
        },
    ),
    (
        UsageEvent(
            **BASE,
            modelId="claude:sonnet",
            usage=Usage(inputTokens=10, outputTokens=2, costUsd=0.01),
        ),
        {
            "type": "usage",
            "modelId": "claude:sonnet",
            "usage": {"inputTokens": 10, "outputTokens": 2, "costUsd": 0.01},
        },
    ),
    (
        ErrorEvent(
            **BASE, kind="rate_limit", message="slow down", retryable=True, retryAfterMs=2000
        ),
        {
            "type": "error",
            "kind": "rate_limit",
            "message": "slow down",
            "retryable": True,
            "retryAfterMs": 2000,
        },
    ),
]


@pytest.mark.parametrize(("event", "payload"), EVENTS, ids=[type(e[0]).__name__ for e in EVENTS])
def test_events_dump_exactly_and_read_back(event: BaseModel, payload: dict[str, Any]) -> None:
    wire = dump(event)
    assert wire == {**BASE, **payload}
    assert parse_task_event(wire) == event
    assert parse_task_event({**wire, "future": 1}) == event


def test_every_event_type_has_a_case() -> None:
    assert {dump(e)["type"] for e, _ in EVENTS} == set(TASK_EVENT_TYPES)
    assert TASK_EVENT_TYPES == (
        "state_changed",
        "text_delta",
        "tool_call_started",
        "tool_call_finished",
        "edit_proposed",
        "approval_required",
        "decision_made",
        "usage",
        "error",
    )


def test_unknown_event_types_are_ignored_not_refused() -> None:
    parsed = parse_task_event({**BASE, "type": "plan_updated", "steps": []})
    assert isinstance(parsed, UnknownTaskEvent) and parsed.type == "plan_updated"


def test_a_known_type_with_a_bad_payload_is_refused() -> None:
    with pytest.raises(ValidationError):
        parse_task_event({**BASE, "type": "text_delta"})
    with pytest.raises(ValidationError):
        parse_task_event({**BASE, "seq": -1, "type": "text_delta", "messageId": "m", "delta": ""})


def test_log_params() -> None:
    log = LogParams(level="warn", message="m", ts="t", fields={"taskId": "x"})
    assert dump(log) == {"level": "warn", "message": "m", "ts": "t", "fields": {"taskId": "x"}}
    with pytest.raises(ValidationError):
        LogParams(level="warning", message="m", ts="t")


# --- JEV ------------------------------------------------------------------------------------------


def risk_state(**overrides: Any) -> dict[str, Any]:
    return {
        "actionType": "run_command",
        "command": "make test",
        "context": {"branch": None, "env": "local", "hasPendingMigrations": False},
        "filesTouched": [{"path": "a", "sensitive": False}],
        **overrides,
    }


def test_pack_states_and_their_caps() -> None:
    assert set(PACK_STATES) == set(KnownPack)
    state = RiskGateState.model_validate(
        risk_state(
            command="x" * 500,
            filesTouched=[{"path": f"f{i}", "sensitive": True} for i in range(50)],
        )
    )
    assert dump(state)["context"] == {"branch": None, "env": "local", "hasPendingMigrations": False}
    with pytest.raises(ValidationError):
        RiskGateState.model_validate(risk_state(command="x" * 501))
    with pytest.raises(ValidationError):
        RiskGateState.model_validate(
            risk_state(filesTouched=[{"path": f"f{i}", "sensitive": False} for i in range(51)])
        )
    with pytest.raises(ValidationError):
        WorkflowSelectState.model_validate(
            {
                "taskType": "edit",
                "filesTouched": [{"path": f"f{i}", "sensitive": False} for i in range(51)],
                "estimatedDiffSize": 0,
                "lastRunStatus": "none",
                "userPreference": "balanced",
                "availableModels": [],
            }
        )


def test_unknown_model_numbers_are_sent_as_null() -> None:
    model = AvailableModel(id="m", contextTokens=None, latencyMs=None, costTier="low")
    assert dump(model) == {"id": "m", "contextTokens": None, "latencyMs": None, "costTier": "low"}


PREVIEWS = [
    (
        "workflow_select@1",
        {
            "taskType": "fix",
            "filesTouched": [{"path": "a", "sensitive": False, "bytesBefore": 3}],
            "truncatedCount": 2,
            "estimatedDiffSize": 12,
            "lastRunStatus": "failed",
            "userPreference": "cheap",
            "availableModels": [
                {
                    "id": "m",
                    "contextTokens": 1000,
                    "latencyMs": None,
                    "costTier": "medium",
                    "locality": "remote",
                }
            ],
        },
        WorkflowSelectState,
    ),
    ("risk_gate@1", risk_state(editFileCount=None), RiskGateState),
    (
        "cost_route@1",
        {
            "taskType": "ask",
            "filesTouchedCount": 3,
            "projectSizeLines": 1000,
            "userCostBias": "best",
            "recentFailures": 0,
        },
        CostRouteState,
    ),
]


@pytest.mark.parametrize(("pack", "state", "model"), PREVIEWS, ids=[p[0] for p in PREVIEWS])
def test_previews_round_trip(pack: str, state: dict[str, Any], model: type[BaseModel]) -> None:
    result = JevPreviewResult.model_validate({"pack": pack, "state": state})
    assert isinstance(result.state, model)
    assert dump(result) == {
        "pack": pack,
        "state": {k: v for k, v in state.items() if v is not None},
    }


def test_judge_results() -> None:
    assert dump(ScoreResult(score=4, probs=[0, 0, 0, 0.5, 0.5])) == {
        "score": 4,
        "probs": [0, 0, 0, 0.5, 0.5],
    }
    with pytest.raises(ValidationError):
        ScoreResult(score=5)
    with pytest.raises(ValidationError):
        ScoreResult(score=1, probs=[1.0])
    with pytest.raises(ValidationError):
        NoulResult(answer="maybe", pYes=0.5)
    with pytest.raises(ValidationError):
        NoulResult(answer="yes", pYes=1.5)


def test_risk_context_branch_is_required_but_nullable() -> None:
    assert dump(RiskGateContext(branch=None, env="ci", hasPendingMigrations=True))["branch"] is None
