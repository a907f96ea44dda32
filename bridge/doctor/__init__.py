"""``codedeck-bridge doctor``: checks with a pass/fail line each and a fix for every failure.

- `model`: `Check` and `Status`;
- `local`: home and database permissions, identity, credentials (no network, no writes);
- `claude`: the Claude Code CLI (bundled with claude-agent-sdk, or on PATH) and its version;
- `agents`: whether each configured ACP agent (OpenCode, ``[agents.<id>]``) starts;
- `sandbox`: whether agents run under bubblewrap, what is hidden from them, and why not;
- `relays`: relay probes (connect, REQ, EOSE), the embedded relay's LAN address, clock skew;
- `command`: the order of the checks, the report, and the CLI glue.
"""

from bridge.doctor.agents import agent_check, check_agents
from bridge.doctor.claude import (
    ClaudeCli,
    check_claude,
    cli_version,
    find_bundled_cli,
    find_path_cli,
)
from bridge.doctor.command import (
    CHECK_NAMES,
    add_doctor_command,
    render_report,
    run_checks,
    run_doctor_command,
)
from bridge.doctor.local import (
    CREDENTIAL_VARIABLES,
    SERVICE_ENV_FILE,
    check_credentials,
    check_database,
    check_home,
    check_identity,
    claude_login_file,
)
from bridge.doctor.model import Check, Status
from bridge.doctor.relays import (
    FUTURE_HINT,
    SKEW_FAIL,
    SKEW_WARN,
    RelayProbe,
    check_clock,
    check_lan,
    check_relay,
    probe_relay,
)
from bridge.doctor.sandbox import check_sandbox_support

__all__ = [
    "CHECK_NAMES",
    "CREDENTIAL_VARIABLES",
    "FUTURE_HINT",
    "SERVICE_ENV_FILE",
    "SKEW_FAIL",
    "SKEW_WARN",
    "Check",
    "ClaudeCli",
    "RelayProbe",
    "Status",
    "add_doctor_command",
    "agent_check",
    "check_agents",
    "check_claude",
    "check_clock",
    "check_credentials",
    "check_database",
    "check_home",
    "check_identity",
    "check_lan",
    "check_relay",
    "check_sandbox_support",
    "claude_login_file",
    "cli_version",
    "find_bundled_cli",
    "find_path_cli",
    "probe_relay",
    "render_report",
    "run_checks",
    "run_doctor_command",
]
