"""The JEV's three result formats, parsed strictly from the judge model's text.

The seed: "Results are choice {selected, probs}, score {score 0–4, probs?}, or noul {answer:
yes|no|unknown, pYes}". A judgement steers the orchestrator (which workflow, which model, whether
to ask the user), so a reply that does not fit is an error, never a guess: this module raises
:class:`MalformedResult` and the caller reports it. It never fills in a default.

What is accepted:

* the whole reply is one JSON object — optionally inside a single Markdown code fence
  (```` ```json … ``` ````), which instruction-tuned models add even when told not to; no prose
  before or after;
* exactly the format's keys (an unknown key is an error: it usually means the model answered
  another question);
* **choice**: ``selected`` is one of the offered options; ``probs`` maps options (only offered
  ones, each in [0, 1]) to probabilities that sum to 1 within :data:`PROB_TOLERANCE`;
* **score**: ``score`` an integer 0–4 (``2.0`` and ``true`` are refused); ``probs`` optional, a
  list of five probabilities (for scores 0…4) summing to 1 within the tolerance;
* **noul**: ``answer`` is ``yes``, ``no`` or ``unknown``; ``pYes`` a number in [0, 1].

Pure: no I/O.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any, Final, Literal, assert_never

from bridge.records import record

__all__ = [
    "PROB_TOLERANCE",
    "ChoiceResult",
    "JevResult",
    "MalformedResult",
    "NoulAnswer",
    "NoulResult",
    "ResultFormat",
    "ScoreResult",
    "parse_choice",
    "parse_noul",
    "parse_result",
    "parse_score",
]

ResultFormat = Literal["choice", "score", "noul"]
NoulAnswer = Literal["yes", "no", "unknown"]

PROB_TOLERANCE: Final = 0.05
"""How far a probability distribution's sum may be from 1 (models round)."""

_FENCE: Final = re.compile(r"\A```(?:json)?[ \t]*\n(?P<body>.*)\n```\Z", re.DOTALL)


class MalformedResult(ValueError):
    """The judge's reply does not fit the expected format (the message says how)."""


@record
class ChoiceResult:
    """``choice {selected, probs}``."""

    selected: str
    probs: Mapping[str, float]

    def to_wire(self) -> dict[str, Any]:
        return {"selected": self.selected, "probs": dict(self.probs)}


@record
class ScoreResult:
    """``score {score 0–4, probs?}``; ``probs[i]`` is the probability of score ``i``."""

    score: int
    probs: tuple[float, ...] | None = None

    def to_wire(self) -> dict[str, Any]:
        wire: dict[str, Any] = {"score": self.score}
        if self.probs is not None:
            wire["probs"] = list(self.probs)
        return wire


@record
class NoulResult:
    """``noul {answer: yes|no|unknown, pYes}``."""

    answer: NoulAnswer
    p_yes: float

    def to_wire(self) -> dict[str, Any]:
        return {"answer": self.answer, "pYes": self.p_yes}


JevResult = ChoiceResult | ScoreResult | NoulResult


def _load_object(text: str) -> dict[str, Any]:
    stripped = text.strip()
    fenced = _FENCE.match(stripped)
    if fenced is not None:
        stripped = fenced.group("body").strip()
    if not stripped.startswith("{"):
        raise MalformedResult("the reply is not a JSON object")
    try:
        value = json.loads(stripped)
    except json.JSONDecodeError as exc:
        raise MalformedResult(f"the reply is not valid JSON ({exc.msg})") from None
    except RecursionError:
        raise MalformedResult("the reply is nested too deeply") from None
    if not isinstance(value, dict):  # pragma: no cover - "{" guarantees an object or an error
        raise MalformedResult("the reply is not a JSON object")
    return value


def _check_keys(obj: Mapping[str, Any], required: set[str], optional: set[str]) -> None:
    missing = required - obj.keys()
    if missing:
        raise MalformedResult(f"missing {', '.join(sorted(missing))}")
    unknown = obj.keys() - required - optional
    if unknown:
        raise MalformedResult(f"unexpected key(s) {', '.join(sorted(unknown))}")


def _probability(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise MalformedResult(f"{what} is not a number")
    number = float(value)
    if not math.isfinite(number) or not 0.0 <= number <= 1.0:
        raise MalformedResult(f"{what} is not between 0 and 1")
    return number


def _check_sum(values: Sequence[float], what: str) -> None:
    if abs(sum(values) - 1.0) > PROB_TOLERANCE:
        raise MalformedResult(f"{what} do not sum to 1")


def parse_choice(text: str, options: Sequence[str]) -> ChoiceResult:
    """Parse a ``choice`` reply.

    Args:
        text: the model's reply.
        options: what it was offered; ``selected`` and the keys of ``probs`` must be among them.

    Raises:
        MalformedResult: the reply does not fit.
    """
    obj = _load_object(text)
    _check_keys(obj, {"selected", "probs"}, set())
    selected = obj["selected"]
    if not isinstance(selected, str) or selected not in options:
        raise MalformedResult("selected is not one of the offered options")
    raw_probs = obj["probs"]
    if not isinstance(raw_probs, dict) or not raw_probs:
        raise MalformedResult("probs is not a non-empty object")
    probs: dict[str, float] = {}
    for key, value in raw_probs.items():
        if key not in options:
            raise MalformedResult("probs names an option that was not offered")
        probs[key] = _probability(value, f"probs[{key!r}]")
    _check_sum(list(probs.values()), "probs")
    return ChoiceResult(selected, probs)


def parse_score(text: str) -> ScoreResult:
    """Parse a ``score`` reply.

    Raises:
        MalformedResult: the reply does not fit.
    """
    obj = _load_object(text)
    _check_keys(obj, {"score"}, {"probs"})
    score = obj["score"]
    if isinstance(score, bool) or not isinstance(score, int) or not 0 <= score <= 4:
        raise MalformedResult("score is not an integer from 0 to 4")
    if "probs" not in obj or obj["probs"] is None:
        return ScoreResult(score)
    raw_probs = obj["probs"]
    if not isinstance(raw_probs, list) or len(raw_probs) != 5:
        raise MalformedResult("probs is not a list of five probabilities (scores 0 to 4)")
    probs = tuple(_probability(value, f"probs[{index}]") for index, value in enumerate(raw_probs))
    _check_sum(probs, "probs")
    return ScoreResult(score, probs)


def parse_noul(text: str) -> NoulResult:
    """Parse a ``noul`` reply.

    Raises:
        MalformedResult: the reply does not fit.
    """
    obj = _load_object(text)
    _check_keys(obj, {"answer", "pYes"}, set())
    answer = obj["answer"]
    if answer == "yes":
        word: NoulAnswer = "yes"
    elif answer == "no":
        word = "no"
    elif answer == "unknown":
        word = "unknown"
    else:
        raise MalformedResult("answer is not yes, no or unknown")
    return NoulResult(word, _probability(obj["pYes"], "pYes"))


def parse_result(fmt: ResultFormat, text: str, options: Sequence[str] = ()) -> JevResult:
    """Parse `text` as the format `fmt` (``options`` only for ``choice``).

    Raises:
        MalformedResult: the reply does not fit.
    """
    match fmt:
        case "choice":
            return parse_choice(text, options)
        case "score":
            return parse_score(text)
        case "noul":
            return parse_noul(text)
        case _:  # pragma: no cover - closed union
            assert_never(fmt)
