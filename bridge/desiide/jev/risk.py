"""How a JEV verdict adjusts the risk gate's outcome: it may raise ``auto`` to ``confirm``, no more.

The rules (the daemon's gate: deny list and floors) decide first; strict mode
(:func:`bridge.desiide.settings.apply_strict`) may raise ``auto`` to ``confirm``; then a JEV
verdict on the ``risk_gate@1`` pack (a ``noul`` answer to "does this call need the user's
confirmation?") may do the same, adding :data:`JEV_RISK_LABEL` (``jev:risk_gate``). It does
nothing else: a ``confirm`` stays ``confirm``, a ``block`` stays ``block`` — a model's opinion
can make the bridge more careful, never less. Both raises only go up, so their order does not
matter.

When it raises: the answer is ``yes``; or ``unknown`` (the judge could not tell, so the human
decides); or ``pYes`` reaches :data:`JEV_RISK_THRESHOLD` whatever the word says (a judge that
contradicts itself is read the cautious way). No verdict (the JEV is off or failed) leaves the
rules' outcome alone: a failed judge must neither block work nor allow anything.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from bridge.desiide.jev.results import NoulResult
from bridge.desiide.settings import RiskOutcome

__all__ = [
    "JEV_RISK_LABEL",
    "JEV_RISK_THRESHOLD",
    "RiskOutcome",
    "combine",
    "combine_with_reasons",
    "jev_wants_confirm",
]

JEV_RISK_LABEL: Final = "jev:risk_gate"
"""Added when the JEV's ``risk_gate@1`` verdict turned an ``auto`` into ``confirm``. Not a seed
label: the seed lets the JEV raise a call but names no label for it; this one follows the
``source:detail`` shape of ``deny_list:<rule>`` so a card shows where the raise came from."""

JEV_RISK_THRESHOLD: Final = 0.5
"""``pYes`` at or above this raises the call, whatever the answer word says."""


def jev_wants_confirm(verdict: NoulResult, threshold: float = JEV_RISK_THRESHOLD) -> bool:
    """Whether a ``risk_gate@1`` verdict asks for the user's confirmation (see the module doc)."""
    return verdict.answer in ("yes", "unknown") or verdict.p_yes >= threshold


def combine(
    rule_outcome: RiskOutcome,
    jev_result: NoulResult | None,
    threshold: float = JEV_RISK_THRESHOLD,
) -> RiskOutcome:
    """The outcome after the JEV's verdict: only ``auto`` → ``confirm`` is possible.

    Args:
        rule_outcome: the outcome of the rules (after strict mode or not: the order doesn't
            matter, both only raise).
        jev_result: the parsed ``risk_gate@1`` verdict, or None when there is none.
        threshold: see :data:`JEV_RISK_THRESHOLD`.
    """
    if (
        rule_outcome == "auto"
        and jev_result is not None
        and jev_wants_confirm(jev_result, threshold)
    ):
        return "confirm"
    return rule_outcome


def combine_with_reasons(
    rule_outcome: RiskOutcome,
    reasons: Sequence[str],
    jev_result: NoulResult | None,
    threshold: float = JEV_RISK_THRESHOLD,
) -> tuple[RiskOutcome, tuple[str, ...]]:
    """:func:`combine`, adding :data:`JEV_RISK_LABEL` when the verdict raised the call."""
    outcome = combine(rule_outcome, jev_result, threshold)
    if outcome != rule_outcome:
        labels = tuple(reasons)
        return outcome, labels if JEV_RISK_LABEL in labels else (*labels, JEV_RISK_LABEL)
    return outcome, tuple(reasons)
