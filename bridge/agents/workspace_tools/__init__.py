"""The Desiide tools an agent gets for an editor's task, run by the session host in a workspace.

``read_file``, ``list_files``, ``search``, ``propose_edit`` and ``run_command``, as the Desiide
tool contract has them (arguments in camelCase, workspace-relative POSIX paths). They run only
after the bridge's gate allowed the call; ``propose_edit`` writes nothing (the editor applies what
the user accepted and the bridge hands the tool the editor's report). Lean: the standard library
only, so a session host can load it.

One job per module: :mod:`.tools` (dispatch, the allowed set, the failure policy),
:mod:`.catalog` (what the model is shown), :mod:`.paths` (the path rule), :mod:`.results`
(results, errors, argument reading), :mod:`.files` (``read_file``, ``propose_edit``),
:mod:`.ripgrep` (``list_files``, ``search``) and :mod:`.command` (``run_command``).
"""

from .catalog import (
    LIST_FILES,
    MAX_TIMEOUT_MS,
    PROPOSE_EDIT,
    READ_FILE,
    RUN_COMMAND,
    SEARCH,
    TOOL_NAMES,
    TOOL_SPECS,
    ToolSpec,
)
from .command import (
    DEFAULT_TIMEOUT_MS,
    DRAIN_AFTER_EXIT,
    KILL_GRACE,
    OUTPUT_CAP,
    SHELL,
    OutputTail,
    run_command,
)
from .files import BINARY_PROBE, NOT_REVIEWED, READ_CAP, REPORT_STATUSES, propose_edit, read_file
from .paths import PATH_REFUSED, Workspace
from .results import (
    INVALID_ARGUMENTS,
    ToolError,
    ToolResult,
    bool_arg,
    check_keys,
    int_arg,
    text_arg,
)
from .ripgrep import (
    COLUMN_CAP,
    LIST_CAP,
    MATCH_CAP,
    RG_TIMEOUT,
    RIPGREP_MISSING,
    find_ripgrep,
    list_files,
    search,
)
from .tools import INTERNAL_ERROR, TOOL_NOT_ALLOWED, UNKNOWN_TOOL, WorkspaceTools

__all__ = [
    "BINARY_PROBE",
    "COLUMN_CAP",
    "DEFAULT_TIMEOUT_MS",
    "DRAIN_AFTER_EXIT",
    "INTERNAL_ERROR",
    "INVALID_ARGUMENTS",
    "KILL_GRACE",
    "LIST_CAP",
    "LIST_FILES",
    "MATCH_CAP",
    "MAX_TIMEOUT_MS",
    "NOT_REVIEWED",
    "OUTPUT_CAP",
    "PATH_REFUSED",
    "PROPOSE_EDIT",
    "READ_CAP",
    "READ_FILE",
    "REPORT_STATUSES",
    "RG_TIMEOUT",
    "RIPGREP_MISSING",
    "RUN_COMMAND",
    "SEARCH",
    "SHELL",
    "TOOL_NAMES",
    "TOOL_NOT_ALLOWED",
    "TOOL_SPECS",
    "UNKNOWN_TOOL",
    "OutputTail",
    "ToolError",
    "ToolResult",
    "ToolSpec",
    "Workspace",
    "WorkspaceTools",
    "bool_arg",
    "check_keys",
    "find_ripgrep",
    "int_arg",
    "list_files",
    "propose_edit",
    "read_file",
    "run_command",
    "search",
    "text_arg",
]
