"""Reading the daemon's transcript entries and cards as the editor's vocabulary.

The session's transcript is the CodeDeck v10 one (:mod:`bridge.agents.claude.adapter`); these
functions pull out what the ``task.event`` stream needs, and never raise on a malformed entry (a
field of the wrong type counts as absent), because one bad line must not end a task:

- :func:`model_error_kind` maps an ``error`` entry onto a ``ModelErrorKind``;
- :func:`refusal` tells a blocked call (the gate or the task policy said no: the tool result
  names the reason labels) from a rejected one (a user said no) from an ordinary tool error;
- :func:`call_paths` and :func:`proposal_files` find the workspace paths a call touches;
- :func:`file_meta` describes a proposed file for the review card (metadata only).

``ModelErrorKind`` (defined here, documented for the editor in DESIIDE.md):

=============  ==========================================================  ==========
kind           what maps onto it                                           retryable
=============  ==========================================================  ==========
auth           401/403, authentication_failed, invalid key, billing        no
rate_limit     429, rate_limit, too many requests, usage limit             yes
overloaded     529/503, overloaded                                         yes
network        connection refused/reset, DNS, fetch failed                 yes
timeout        timed out, 408/504                                          yes
not_found      404, not_found_error, unknown model                         no
bad_request    400/413/422, invalid_request, prompt too long               no
server         500/502, api_error, server_error                            yes
unknown        anything else                                               no
=============  ==========================================================  ==========

The HTTP statuses follow :mod:`bridge.desiide.models.errors` (which classifies ``models.test``'s
answers); here the input is the CLI's error text. Billing errors count as ``auth``: the remedy
is the same (the account's settings), and a retry cannot help.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from bridge.records import record

__all__ = [
    "RETRYABLE_KINDS",
    "Refusal",
    "call_paths",
    "file_meta",
    "model_error_kind",
    "proposal_files",
    "refusal",
    "ripgrep_missing",
]

RETRYABLE_KINDS: Final = frozenset({"rate_limit", "overloaded", "network", "timeout", "server"})

# The CLI's `assistant.error` values (claude-agent-sdk's AssistantMessageError) and the adapter's
# `special: auth_error`; "unknown" and the result subtypes (error_during_execution, …) say
# nothing, so the text decides.
_ERROR_TYPES: Final = {
    "authentication_failed": "auth",
    "auth_error": "auth",
    "billing_error": "auth",
    "rate_limit": "rate_limit",
    "invalid_request": "bad_request",
    "server_error": "server",
    "overloaded": "overloaded",
}
# First match wins: "504 gateway timeout" is a timeout before it is a server error.
_ERROR_TEXTS: Final = (
    ("auth", re.compile(r"\b40[13]\b|authenticat|api[ _-]?key|unauthori[sz]ed|permission_error"
                        r"|credit balance|billing")),
    ("rate_limit", re.compile(r"\b429\b|rate[ _-]?limit|too many requests|usage limit")),
    ("overloaded", re.compile(r"\b(?:529|503)\b|overloaded|service unavailable")),
    ("timeout", re.compile(r"timed? ?out|timeout|\b40[8]\b|\b504\b|etimedout")),
    ("network", re.compile(r"econn(?:refused|reset|aborted)|enotfound|eai_again|network"
                           r"|connection (?:error|refused|reset)|fetch failed|socket hang up"
                           r"|unable to connect")),
    ("not_found", re.compile(r"\b404\b|not_found|not found")),
    ("bad_request", re.compile(r"\b(?:400|413|422)\b|invalid_request|bad request|too long")),
    ("server", re.compile(r"\b50[02]\b|api_error|server_error|internal server error"
                          r"|bad gateway")),
)  # fmt: skip


def model_error_kind(text: str, error_type: str | None = None) -> str:
    """The ``ModelErrorKind`` of an ``error`` entry (see the module table).

    Args:
        text: the entry's content.
        error_type: its ``metadata.error_type`` (or ``special``), when it has one.
    """
    if error_type is not None and (kind := _ERROR_TYPES.get(error_type)) is not None:
        return kind
    lowered = text.lower()
    for kind, pattern in _ERROR_TEXTS:
        if pattern.search(lowered):
            return kind
    return "unknown"


# --- refused calls ---------------------------------------------------------------------------

# Labels a block may name: the gate's deny rules and floors, the task policy's (COR-2) and the
# workflow's. A floor alone never blocks, but a block's text lists every label the call had.
_LABEL: Final = re.compile(
    r"(?<![\w:])(deny_list:[a-z_]+|budget:[A-Za-z]+|tool_not_allowed|gate_error"
    r"|policy_override:[a-z_]+|option_unavailable(?::[\w.@-]+)?|no_models_configured"
    r"|outside_workspace|command_substitution|privileged|background_process"
    r"|unparsable_command|inline_code|loop_detected)(?![\w:])"
)
_BLOCKING_LABEL: Final = re.compile(r"^(deny_list:|budget:|tool_not_allowed$)")
_DENIAL: Final = re.compile(r"\b(?:denied|rejected) (?:this|the) (?:tool )?call\b", re.IGNORECASE)


@record
class Refusal:
    """Why a call did not run: ``blocked`` (policy) or ``rejected`` (a user), with the labels."""

    kind: str
    reasons: tuple[str, ...]


def refusal(text: str, is_error: bool) -> Refusal | None:
    """Whether a tool result is a refusal rather than the tool's own outcome.

    A block is an error result that says ``Blocked`` or names a blocking label (a deny rule,
    ``tool_not_allowed``, ``budget:*``): the gate's text is ``Blocked by the bridge's risk gate:
    deny_list:rm_rf — …``, the task policy's ``Blocked: tool_not_allowed …``, and a ``PreToolUse``
    deny reaches the model with its reason inside the CLI's own wording. A rejection is an error
    result in which a user "denied"/"rejected this (tool) call" (the phone's answers say so).
    """
    if not is_error:
        return None
    labels = tuple(dict.fromkeys(_LABEL.findall(text)))
    if "Blocked" in text or any(_BLOCKING_LABEL.match(label) for label in labels):
        return Refusal("blocked", labels)
    if _DENIAL.search(text):
        return Refusal("rejected", labels)
    return None


def ripgrep_missing(text: str, is_error: bool) -> bool:
    """A ``list_files``/``search`` error whose first line says ``ripgrep_missing`` (the tool
    contract: "the tool result is an error whose text starts with ripgrep_missing")."""
    return is_error and "ripgrep_missing" in text.lstrip().split("\n", 1)[0]


# --- paths -----------------------------------------------------------------------------------


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def proposal_files(args: Mapping[str, Any]) -> list[tuple[str, str | None]]:
    """The ``(path, content)`` pairs of a ``propose_edit`` (``None`` content: delete), in order,
    one per path (a path named twice keeps its last content: the file ends as that)."""
    files = args.get("files")
    out: dict[str, str | None] = {}
    for item in files if isinstance(files, list) else []:
        if not isinstance(item, Mapping) or (path := _str(item.get("path"))) is None:
            continue
        out.pop(path, None)
        out[path] = _str(item.get("content"))
    return list(out.items())


def call_paths(tool: str, args: Mapping[str, Any]) -> list[str]:
    """The workspace paths a call names (``approval_required.paths``): the file of
    ``read_file``, the directory of ``list_files``/``search`` (``.`` by default), every file of
    ``propose_edit``; none for ``run_command`` (a command's paths are the gate's business)."""
    if tool == "read_file":
        path = _str(args.get("path"))
        return [path] if path is not None else []
    if tool in ("list_files", "search"):
        path = _str(args.get("path"))
        return [path if path is not None else "."]
    if tool == "propose_edit":
        return [path for path, _ in proposal_files(args)]
    return []


def file_meta(path: str, content: str | None, sensitive: bool) -> dict[str, Any]:
    """``FileMeta`` of a proposed file: ``{path, sensitive, bytesAfter}`` (the new content's
    UTF-8 size), or ``{path, sensitive, deleted: true}`` for a deletion. Metadata only, never the
    content; what the file holds now (``bytesBefore``, ``created``) needs the disk, which the
    runtime may add."""
    if content is None:
        return {"path": path, "sensitive": sensitive, "deleted": True}
    size = len(content.encode("utf-8", "surrogatepass"))
    return {"path": path, "sensitive": sensitive, "bytesAfter": size}
