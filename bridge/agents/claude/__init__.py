"""The Claude Code runner (claude-agent-sdk): runner, SDK message adapter, provider environment.

The public names of the submodules are re-exported here; see :mod:`.runner` for how a session
runs (and which of :mod:`.runner_state`, :mod:`.lifecycle`, :mod:`.stream` and :mod:`.tool_hooks` does
what), :mod:`.adapter` for the entry vocabulary, :mod:`.environment` for provider-bound sessions
and :mod:`.transcript` for the exactly-once record.
"""

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
from .channel import ControlChannel, Operation, control_request
from .environment import (
    KEPT_CLAUDE_VARIABLES,
    MODEL_VARIABLES,
    SCRUBBED_PREFIXES,
    SDK_MANAGED_VARIABLES,
    claude_config_dir,
    provider_env,
    scrub_vendor_env,
    sdk_env,
)
from .handoff import InputHandoff
from .lifecycle import CLOSE_TIMEOUT, CONTROL_TIMEOUT, SessionTask
from .models import fetch_models, models_from_server_info
from .options import MAX_MODEL_LENGTH, Call, change_effort, change_model
from .permissions import (
    ALWAYS_DESTINATION,
    DEFAULT_DENY_MESSAGE,
    PendingPermission,
    PermissionBroker,
    PermissionResult,
    ToolOrder,
    always_rules,
)
from .process import (
    INTERRUPT_BEFORE_STOP,
    crash_reason,
    kill_child,
    session_options,
    stop_client,
)
from .render import (
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
from .runner import (
    MAX_RESTARTS,
    RESTART_DENY_MESSAGE,
    TOOL_USE_WAIT,
    ClaudeRunner,
    EnvHook,
    ToolCheck,
    claude_runner_factory,
)
from .runner_state import AGENT_NAME, CLOSE_DENY_MESSAGE, RunnerState, iso_timestamp, short_reason
from .stream import StreamFailed, read_messages, write_inputs
from .tool_hooks import ToolHooks
from .transcript import (
    INPUT_UUID_NAMESPACE,
    input_uuid,
    last_total_cost,
    received_uuids,
    transcript_paths,
)

__all__ = [
    "AGENT_NAME",
    "ALWAYS_DESTINATION",
    "AUTHORED_MEMORY",
    "CARD_TOOLS",
    "CLOSE_DENY_MESSAGE",
    "CLOSE_TIMEOUT",
    "CONTROL_TIMEOUT",
    "DEFAULT_DENY_MESSAGE",
    "DIFF_LINE_CHARS",
    "DIFF_MAX_LINES",
    "DIFF_TOOLS",
    "INPUT_UUID_NAMESPACE",
    "INTERRUPTED_TEXT",
    "INTERRUPT_BEFORE_STOP",
    "JSON_SUMMARY_CHARS",
    "KEPT_CLAUDE_VARIABLES",
    "MAX_MODEL_LENGTH",
    "MAX_RESTARTS",
    "META_FIELD_CHARS",
    "MODEL_VARIABLES",
    "RESTART_DENY_MESSAGE",
    "RESULT_MAX_CHARS",
    "SCRUBBED_PREFIXES",
    "SDK_MANAGED_VARIABLES",
    "TOOL_USE_WAIT",
    "TRUNCATED_MARK",
    "Adapter",
    "Call",
    "ClaudeRunner",
    "ControlChannel",
    "EnvHook",
    "InputHandoff",
    "Operation",
    "PendingPermission",
    "PermissionBroker",
    "PermissionResult",
    "RunnerState",
    "SessionMeta",
    "SessionTask",
    "StreamFailed",
    "ToolCheck",
    "ToolHooks",
    "ToolOrder",
    "always_rules",
    "build_diff",
    "change_effort",
    "change_model",
    "claude_config_dir",
    "claude_runner_factory",
    "control_request",
    "crash_reason",
    "diff_fallback_text",
    "fetch_models",
    "input_uuid",
    "iso_timestamp",
    "kill_child",
    "last_total_cost",
    "models_from_server_info",
    "parse_session_meta",
    "provider_env",
    "read_messages",
    "received_uuids",
    "scrub_vendor_env",
    "sdk_env",
    "session_options",
    "short_reason",
    "stop_client",
    "strip_session_meta",
    "tool_result_text",
    "tool_summary",
    "transcript_paths",
    "write_inputs",
]
