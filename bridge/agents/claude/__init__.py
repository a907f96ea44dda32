"""Claude Code in a session host: the driver, the CLI's protocol, its environment and records.

What the daemon uses: :func:`claude_driver_factory` (the host's
:class:`~bridge.host.driver.DriverFactory` for Claude Code), :func:`fetch_models` (the model list
when no session is live), :func:`provider_env` / :func:`scrub_vendor_env` /
:func:`claude_config_dir` (environments of provider-bound sessions, and where the CLI keeps its
files) and :func:`bundled_cli_path`.

One job per module: :mod:`.driver` (one CLI's lifetime), :mod:`.cli_process` (argv, environment,
spawn and stop), :mod:`.cli_protocol` (the stream-json control protocol), :mod:`.tool_calls`
(permission prompts and the ``PreToolUse`` check), :mod:`.permissions` (their answers),
:mod:`.options` (mode, effort, model), :mod:`.handoff` (inputs on their way in),
:mod:`.transcript` (the CLI's own record), :mod:`.models`, :mod:`.environment`, and
:mod:`.adapter` (frames → transcript entries, read on a phone through :mod:`bridge.agents.tool_render`).

Lean on purpose: a session host imports this package, so nothing here loads pydantic,
:mod:`bridge.protocol`, the daemon's stack or ``claude_agent_sdk`` (a test checks).
"""

from bridge.agents.tool_render import (
    DIFF_LINE_CHARS,
    DIFF_MAX_LINES,
    DIFF_TOOLS,
    JSON_SUMMARY_CHARS,
    RESULT_MAX_CHARS,
    TRUNCATED_MARK,
    build_diff,
    diff_fallback_text,
    tool_result_text,
    tool_summary,
)

from .adapter import (
    AUTHORED_MEMORY,
    CARD_TOOLS,
    INTERRUPTED_TEXT,
    META_FIELD_CHARS,
    Adapter,
    SessionMeta,
    parse_session_meta,
    strip_session_meta,
)
from .cli_process import (
    SDK_VERSION_FALLBACK,
    STDERR_CHARS,
    STDERR_LINES,
    STDOUT_LIMIT,
    CliOptions,
    CliProcess,
    PipeWriter,
    build_argv,
    bundled_cli_path,
    cli_env,
    exit_reason,
    sdk_version,
    spawn_cli,
)
from .cli_protocol import (
    ControlError,
    ControlProtocol,
    ControlTimeout,
    Handler,
    LineWriter,
    ProtocolClosed,
)
from .driver import (
    EXIT_WAIT,
    INTERRUPT_BEFORE_STOP,
    STOP_TIMEOUT,
    UNRESUMABLE_TEXT,
    ClaudeDriver,
    claude_driver_factory,
)
from .environment import (
    KEPT_CLAUDE_VARIABLES,
    MODEL_VARIABLES,
    SCRUBBED_PREFIXES,
    SDK_MANAGED_VARIABLES,
    claude_config_dir,
    provider_env,
    scrub_vendor_env,
)
from .handoff import InputHandoff
from .models import fetch_models, models_from_initialize
from .options import (
    CONTROL_TIMEOUT,
    MAX_MODEL_LENGTH,
    Request,
    applied_settings,
    change_effort,
    change_mode,
    change_model,
    requested_mode,
    start_effort,
    start_mode,
)
from .permissions import (
    ALWAYS_DESTINATION,
    DEFAULT_DENY_MESSAGE,
    UNKNOWN_VERDICT_MESSAGE,
    ToolOrder,
    always_rules,
    hook_response,
    permission_response,
)
from .tool_calls import HOOK_CALLBACK_ID, HOOK_TIMEOUT, TOOL_USE_WAIT, ToolCalls, hooks_config
from .transcript import (
    INPUT_UUID_NAMESPACE,
    input_uuid,
    last_total_cost,
    received_uuids,
    transcript_paths,
)

__all__ = [
    "ALWAYS_DESTINATION",
    "AUTHORED_MEMORY",
    "CARD_TOOLS",
    "CONTROL_TIMEOUT",
    "DEFAULT_DENY_MESSAGE",
    "DIFF_LINE_CHARS",
    "DIFF_MAX_LINES",
    "DIFF_TOOLS",
    "EXIT_WAIT",
    "HOOK_CALLBACK_ID",
    "HOOK_TIMEOUT",
    "INPUT_UUID_NAMESPACE",
    "INTERRUPTED_TEXT",
    "INTERRUPT_BEFORE_STOP",
    "JSON_SUMMARY_CHARS",
    "KEPT_CLAUDE_VARIABLES",
    "MAX_MODEL_LENGTH",
    "META_FIELD_CHARS",
    "MODEL_VARIABLES",
    "RESULT_MAX_CHARS",
    "SCRUBBED_PREFIXES",
    "SDK_MANAGED_VARIABLES",
    "SDK_VERSION_FALLBACK",
    "STDERR_CHARS",
    "STDERR_LINES",
    "STDOUT_LIMIT",
    "STOP_TIMEOUT",
    "TOOL_USE_WAIT",
    "TRUNCATED_MARK",
    "UNKNOWN_VERDICT_MESSAGE",
    "UNRESUMABLE_TEXT",
    "Adapter",
    "ClaudeDriver",
    "CliOptions",
    "CliProcess",
    "ControlError",
    "ControlProtocol",
    "ControlTimeout",
    "Handler",
    "InputHandoff",
    "LineWriter",
    "PipeWriter",
    "ProtocolClosed",
    "Request",
    "SessionMeta",
    "ToolCalls",
    "ToolOrder",
    "always_rules",
    "applied_settings",
    "build_argv",
    "build_diff",
    "bundled_cli_path",
    "change_effort",
    "change_mode",
    "change_model",
    "claude_config_dir",
    "claude_driver_factory",
    "cli_env",
    "diff_fallback_text",
    "exit_reason",
    "fetch_models",
    "hook_response",
    "hooks_config",
    "input_uuid",
    "last_total_cost",
    "models_from_initialize",
    "parse_session_meta",
    "permission_response",
    "provider_env",
    "received_uuids",
    "requested_mode",
    "scrub_vendor_env",
    "sdk_version",
    "spawn_cli",
    "start_effort",
    "start_mode",
    "strip_session_meta",
    "tool_result_text",
    "tool_summary",
    "transcript_paths",
]
