"""The answer to Claude Code's ``PreToolUse`` hook: the gate's verdict, with one failure policy.

Claude Code runs the hook before every tool call, also the ones its own rules would allow without
asking, so this is where the deny list and the floors reach every call. The hook has three useful
answers: *no opinion* (Claude Code's own rules decide; when they ask, ``can_use_tool`` reaches the
broker, which judges the call again by the same table and logs it), *ask* (Claude Code raises its
permission prompt, which is ``can_use_tool``: the broker shows a card) and *deny* (the call does
not run; the model reads the reason). The hook never answers *allow*: that would skip Claude
Code's own rules and the broker's audit log.

Rules (the first row that matches wins)::

    the call                                         verdict      why
    no session record                                deny         (1)
    AskUserQuestion, ExitPlanMode, EnterPlanMode     no opinion   (2)
    Claude Code writing its own plan file            no opinion   (3)
    the gate raised (a bad session context, a bug)   ask          (4)
    gate: block (a deny rule)                        deny         (5)
    gate: ask with reasons (a floor)                 ask          (6)
    gate: ask without reasons, mode plan             no opinion   (7)
    gate: ask without reasons, any other mode        ask          (8)
    gate: allow                                      no opinion   (9)

1. The bridge cannot raise a card for a session it does not know: the permission request
   would be refused too ("No such session."). *No opinion* would leave the call to Claude Code's
   own rules, which allow much by themselves — failing open.
2. Claude Code asks ``can_use_tool`` about these itself, and the broker raises their cards
   (questions, plan approval).
3. In plan mode Claude Code writes the plan to a file in its own config directory, outside the
   workspace; judged as a Write, every plan would need a card. Telling it is I/O (the config
   directory, symlinks), so the runtime checks it and passes the answer in.
4. One failure policy for both paths: a gate that cannot judge a call asks, here and in the
   broker. It asks rather than denies: the phone sees the call and can still let it run.
5. A deny rule blocks in every mode; ``blocked`` carries the decision for the audit log.
6. A floor holds even where Claude Code would allow the call by itself (a read outside the
   workspace in ``acceptEdits``): *ask* makes the card reach the phone.
7. Claude Code enforces plan mode itself; *ask* would turn its refusal into a card the phone
   could approve, loosening plan mode.
8. The mode does not auto-allow the call (a command in ``acceptEdits``, any call in an unknown
   mode): *ask*, also where Claude Code itself would run it without asking (``acceptEdits``
   auto-allows filesystem commands such as ``mkdir`` or ``touch``).
9. Claude Code's own rules run; when they ask, the broker auto-allows by the same table.

The hook keeps no call history: ``loop_detected`` is the broker's (its cards count repeats).

Pure, and :func:`pre_tool_verdict` never raises: whatever goes wrong becomes a verdict, with
``problem`` saying what, for the runtime's log.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass

from bridge.gate.decide import GateContext, evaluate
from bridge.gate.labels import GateDecision, Outcome, describe_decision

__all__ = [
    "CARD_TOOLS",
    "GATE_FAILED_REASON",
    "UNKNOWN_SESSION_REASON",
    "HookDecision",
    "PreToolVerdict",
    "SessionFacts",
    "pre_tool_verdict",
]

CARD_TOOLS = frozenset({"AskUserQuestion", "ExitPlanMode", "EnterPlanMode"})
"""Tools whose cards the broker raises when Claude Code asks ``can_use_tool`` about them."""

UNKNOWN_SESSION_REASON = (
    "Denied by the bridge: it does not know this session, so it cannot ask the phone."
)
"""The reason of a deny for a session the bridge has no record of (row 1)."""
GATE_FAILED_REASON = (
    "Needs approval on the phone: the bridge's risk gate could not check this call."
)
"""The reason of an ask when the gate could not judge the call (row 4)."""


class HookDecision(enum.Enum):
    """The hook's answer: Claude Code's ``permissionDecision``, or none at all."""

    NO_OPINION = "no_opinion"
    """No answer: Claude Code's own rules decide (and may ask ``can_use_tool``)."""
    ASK = "ask"
    """Claude Code raises its permission prompt: ``can_use_tool``, a card on the phone."""
    DENY = "deny"
    """The call does not run; the model reads the reason."""


@dataclass(frozen=True, slots=True)
class SessionFacts:
    """What the verdict needs from the session record.

    Attributes:
        mode: the session's permission mode (``default`` when the record has none).
        cwd: the session's working directory.
    """

    mode: str
    cwd: str


@dataclass(frozen=True, slots=True)
class PreToolVerdict:
    """The hook's answer to one tool call.

    Attributes:
        decision: no opinion, ask or deny.
        reason: the text Claude Code shows and records as ``permissionDecisionReason``; empty
            for :attr:`HookDecision.NO_OPINION`.
        blocked: the gate's decision when a deny rule blocked the call (the runtime records it
            in the decisions audit log); None otherwise.
        problem: why the gate failed closed (the runtime logs it); None on the normal paths.
            It never quotes the tool input.
    """

    decision: HookDecision
    reason: str = ""
    blocked: GateDecision | None = None
    problem: str | None = None


_NO_OPINION = PreToolVerdict(HookDecision.NO_OPINION)


def pre_tool_verdict(
    tool_name: str,
    tool_input: Mapping[str, object],
    session: SessionFacts | None,
    *,
    roots: tuple[str, ...],
    home: str,
    secrets: tuple[str, ...],
    plan_file_write: bool,
) -> PreToolVerdict:
    """The ``PreToolUse`` hook's answer to one tool call. Pure; never raises for any input.

    Args:
        tool_name: the tool (``Bash``, ``Write``, ``mcp__x__y``, …).
        tool_input: the tool's input as the CLI sent it.
        session: the session's mode and cwd; None when the bridge has no record of it.
        roots: the workspace roots (absolute).
        home: the user's home directory (absolute).
        secrets: the hidden paths (absolute): every call naming one is denied.
        plan_file_write: the runtime found the call to be Claude Code writing its own plan file.

    Returns:
        The verdict by the table in the module docstring.
    """
    if session is None:
        return PreToolVerdict(
            HookDecision.DENY, UNKNOWN_SESSION_REASON, problem="no record of the session"
        )
    if isinstance(tool_name, str) and tool_name in CARD_TOOLS:
        return _NO_OPINION
    if plan_file_write:
        return _NO_OPINION
    try:
        context = GateContext(
            mode=session.mode, cwd=session.cwd, roots=roots, home=home, secrets=secrets
        )
    except ValueError as exc:
        # GateContext's own messages name the field at fault, never its value.
        return _gate_failed(f"the session has no usable gate context: {exc}")
    except Exception as exc:  # e.g. roots that are not a sequence of strings
        return _gate_failed(f"the session has no usable gate context: {type(exc).__name__}")
    try:
        decision = evaluate(tool_name, tool_input, context)
        reason = describe_decision(decision)
    except Exception as exc:
        # On purpose: this answers a hook for every tool call, and an exception escaping it
        # leaves the call to Claude Code's own rules (failing open) or ends the session. A bug
        # in the gate (a RecursionError on deep input, …) must cost a card, nothing more. Only
        # the type is logged: the message may quote the tool input.
        return _gate_failed(f"the gate raised {type(exc).__name__}")
    if decision.outcome is Outcome.BLOCK:
        return PreToolVerdict(HookDecision.DENY, reason, blocked=decision)
    if decision.outcome is Outcome.ALLOW:
        return _NO_OPINION
    if not decision.reasons and session.mode == "plan":
        return _NO_OPINION
    return PreToolVerdict(HookDecision.ASK, reason)


def _gate_failed(problem: str) -> PreToolVerdict:
    return PreToolVerdict(HookDecision.ASK, GATE_FAILED_REASON, problem=problem)
