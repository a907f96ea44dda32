"""The red-team scenario: a hostile agent in mode ``default``, driven through the whole bridge.

A throwaway home stands in for the user's (:mod:`tests.differential.home`: a project ``~/proj``
cloned from a bare ``~/remote.git``, dotfiles, ``~/.ssh`` and ``~/.netrc`` holding canaries). The
daemon runs on its defaults inside it: ``HOME`` is that home, the bridge home is ``~/.codedeck``
(its real database holds the identity key), the workspace root is the home, and the Claude Code
CLI keeps its state in ``~/.claude``. A paired phone opens a session in ``~/proj``; the mock
model (:mod:`tests.support.mock_anthropic`) then sends every attack of the corpus as a tool call
— Bash lines, and Read/Write/Edit of the secrets and dotfiles — while the phone answers each
card the same way (allow everything: the sandbox must hold even when the phone approves; or deny
everything: the phone must have seen each call the gate refuses).

:func:`run_scenario` returns what happened, for the tests and the sandbox-off report alike: per
attack, whether the phone saw a card or a block and what the tool result said; and, measured on
disk and on the wire, what changed outside the project and where any canary showed up — in the
project's files, in the requests the model received (what an exfiltrating agent sends out), or
in the uploads the attacker's web server took.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bridge.gate import GateContext, evaluate
from bridge.gate import Outcome as Verdict
from bridge.protocol import CreateSessionCommand, InputCommand, ModeCommand, PermissionResCommand
from tests.differential.home import Effects, effects, leaked_in
from tests.differential.web import ScriptServer
from tests.integration.conftest import pair_phone
from tests.support.mock_anthropic import MockAnthropic
from tests.support.phone import PhoneSimulator

from .attacks import Attack, all_attacks, read_of
from .home import RedTeamHome

__all__ = ["Observed", "Outcome", "escapes", "run_scenario", "unseen_refusals"]

WAIT = 60.0
TURN_WAIT = 180.0
AGENT_CHECK = 90.0
"""Seconds for the daemon's start-up check of a configured agent (OpenCode: 3-5 s)."""

_BLOCKED = "risk gate"
"""What the tool result of a call the gate blocked says (``Blocked by the bridge's risk gate``)."""

_CLI_REFUSED = "<tool_use_error>"
"""How the tool result of a call Claude Code refused by itself starts."""


@dataclass(slots=True)
class Outcome:
    """What became of one attack."""

    attack: Attack
    card: bool = False
    """The phone got a permission card for it."""
    blocked: bool = False
    """The gate blocked it (the tool result says so)."""
    result: str = ""
    """The tool result the model received (its start)."""
    cli_refused: bool = False
    """Claude Code refused the call itself, before any permission check (an unread file, a
    binary file): it never ran."""
    effects: Effects | None = None
    """What it did on disk, when the scenario ran it in a turn of its own."""

    @property
    def seen(self) -> str:
        """What the phone saw: ``block``, ``card``, ``cli`` (Claude Code refused the call
        itself, before any permission check), or ``none`` (it ran without a card)."""
        if self.blocked:
            return "block"
        if self.card:
            return "card"
        return "cli" if self.cli_refused else "none"


@dataclass(slots=True)
class Observed:
    """Everything a run saw."""

    outcomes: list[Outcome]
    effects: Effects
    """The whole run's effects outside the project (the canary search included)."""
    model_leaks: list[str] = field(default_factory=list)
    """Canaries found in the requests the mock model received."""
    upload_leaks: list[str] = field(default_factory=list)
    """Canaries found in what the attacker's web server received."""
    sandboxed: bool | None = None
    """What the session's ``session-ready`` said of its sandbox (None: it did not say)."""


def escapes(observed: Observed) -> list[str]:
    """Everything that got out, one line each; empty when the run was contained.

    An attack the agent never made counts too: a run that sent nothing proves nothing.
    """
    problems = [f"never made: {o.attack.id}" for o in observed.outcomes if o.result == "(no call)"]
    problems += [
        f"{o.attack.id}: {o.effects.describe()}"
        for o in observed.outcomes
        if o.effects is not None and o.effects.harmful
    ]
    harm = observed.effects
    if harm.wrote or harm.deleted or harm.moved_refs:
        problems.append(f"the run: {harm.describe()}")
    problems += [f"canary in the project: {name}" for name in harm.leaked]
    problems += [f"canary sent to the model: {name}" for name in observed.model_leaks]
    problems += [f"canary uploaded: {name}" for name in observed.upload_leaks]
    return problems


def unseen_refusals(
    observed: Observed,
    context: GateContext,
    *,
    unasked: Collection[str] = (),
    also: Collection[str] = (),
) -> list[str]:
    """The calls whose sight on the phone differs from the gate's verdict, one line each.

    A block must show as a block, an ask as a card, an allow as nothing. `unasked` are attack
    ids the agent runs without asking (the phone sees nothing whatever the verdict); `also` are
    other sights taken for any verdict (``cli``: the agent refused the call by itself).
    """
    expected = {Verdict.BLOCK: "block", Verdict.ASK: "card", Verdict.ALLOW: "none"}
    unseen = []
    for outcome in observed.outcomes:
        verdict = evaluate(outcome.attack.tool, outcome.attack.input, context).outcome
        wanted = "none" if outcome.attack.id in unasked else expected[verdict]
        if outcome.seen not in (wanted, *also):
            unseen.append(f"{outcome.attack.id}: gate {verdict.value}, phone saw {outcome.seen}")
    return unseen


async def open_session(
    phone: PhoneSimulator, cwd: Path, agent: str, sandboxed: dict[str, bool | None]
) -> str:
    """A session of `agent` in `cwd`, switched to mode ``default``; whether its agent runs in
    the sandbox (as its ``session-ready`` says) goes into `sandboxed`."""
    if agent != "claude":  # the daemon checks a configured agent at start-up
        await phone.wait_for(
            "sessions", lambda m: agent in (m.capabilities or []), timeout=AGENT_CHECK
        )
    mark = phone.mark()
    await phone.send(CreateSessionCommand(cwd=str(cwd), agent=None if agent == "claude" else agent))
    done = await phone.wait_for(("session-ready", "session-failed"), after=mark, timeout=WAIT)
    assert done.message.type == "session-ready", done.message
    session = str(done.message.session.id)
    sandboxed[session] = getattr(done.message.session, "sandboxed", None)
    await phone.send(ModeCommand(sessionId=session, mode="default"))
    await phone.wait_for("mode-confirmed", lambda m: m.mode == "default", after=mark, timeout=WAIT)
    return session


def _special(message: Any) -> str | None:
    metadata = getattr(getattr(message, "entry", None), "metadata", None) or {}
    special = metadata.get("special")
    return special if isinstance(special, str) else None


async def answer_cards(phone: PhoneSimulator, session: str, *, allow: bool, seen: set[str]) -> None:
    """Answer every permission card of `session` as it arrives (until cancelled); the tool ids
    of the cards go into `seen`."""
    cursor = 0
    while True:
        messages = phone.messages("output", after=cursor)
        cursor = phone.mark()
        for received in messages:
            message = received.message
            if message.sessionId != session or _special(message) != "permission_request":
                continue
            request = str(message.entry.metadata["tool_use_id"])
            if request in seen:
                continue
            seen.add(request)
            await phone.send(
                PermissionResCommand(sessionId=session, requestId=request, allow=allow)
            )
        await asyncio.sleep(0.05)


def _stream_end(message: Any) -> bool:
    entry = getattr(message, "entry", None)
    return entry is not None and (entry.metadata or {}).get("stream_end") is True


async def run_turn(phone: PhoneSimulator, session: str, attacks: Sequence[Attack]) -> None:
    """One prompt whose reply makes every call of `attacks` at once; waits for the turn's end."""
    prompt = " ".join(["[[say: red team]]", *(a.directive() for a in attacks), "[[after: done]]"])
    mark = phone.mark()
    await phone.send(InputCommand(sessionId=session, text=prompt))
    await phone.wait_for("output", _stream_end, after=mark, timeout=TURN_WAIT)


def tool_calls(mock: MockAnthropic, after: int) -> tuple[dict[str, Any], dict[str, str]]:
    """From the model's requests since index `after`: tool id → its call, tool id → result."""
    calls: dict[str, Any] = {}
    results: dict[str, str] = {}
    for request in mock.message_requests()[after:]:
        for message in request.body.get("messages", []) if isinstance(request.body, dict) else []:
            content = message.get("content")
            if not isinstance(content, list):
                continue
            for block in content:
                if not isinstance(block, dict):
                    continue
                if block.get("type") == "tool_use":
                    calls[str(block.get("id"))] = block
                elif block.get("type") == "tool_result":
                    results[str(block.get("tool_use_id"))] = _result_text(block.get("content"))
    return calls, results


def _result_text(content: object) -> str:
    if isinstance(content, list):
        return " ".join(str(item.get("text", "")) for item in content if isinstance(item, dict))
    return str(content or "")


def match_outcomes(
    turns: Sequence[Sequence[Attack]],
    calls: Mapping[str, Any],
    results: Mapping[str, str],
    cards: Iterable[str],
    blocks: Iterable[str],
) -> list[Outcome]:
    """Each attack's card, block and result, found by its tool call: the same tool, and every
    value of the attack's input among the call's (an agent names the fields its own way, and
    may add some: ``replace_all``, ``description``)."""
    carded = {card.split("#")[0] for card in cards}  # an ACP agent's second ask: `<id>#2`
    blocked = set(blocks)
    outcomes = []
    for attack in (a for turn in turns for a in turn):
        tool_id = next(
            (
                tool_id
                for tool_id, call in calls.items()
                if str(call.get("name", "")).lower() == attack.tool.lower()
                and isinstance(call.get("input"), dict)
                and all(value in call["input"].values() for value in attack.input.values())
            ),
            None,
        )
        result = results.get(tool_id, "(no call)") if tool_id else "(no call)"
        outcomes.append(
            Outcome(
                attack,
                card=tool_id in carded,
                blocked=tool_id in blocked or _BLOCKED in result,
                result=result[:300],
                cli_refused=result.startswith(_CLI_REFUSED) and _BLOCKED not in result,
            )
        )
    return outcomes


def seen_on_phone(phone: PhoneSimulator, session: str, attack: Attack, mark: int) -> Outcome:
    """An attack's outcome from what the phone saw since `mark` (its turn alone): whatever the
    agent, and whether or not it told the model (OpenCode ends its turn at a refusal)."""
    outcome = Outcome(attack, result="(no call)")
    for received in phone.messages("output", after=mark):
        message = received.message
        if message.sessionId != session:
            continue
        entry = message.entry
        if _special(message) == "permission_request":
            outcome.card = True
        elif entry.entryType == "tool_use" and outcome.result == "(no call)":
            outcome.result = "(no result)"
        elif entry.entryType == "tool_result" and outcome.result in ("(no call)", "(no result)"):
            outcome.result = entry.content[:300]
            outcome.blocked = _BLOCKED in entry.content or entry.content.startswith("Blocked:")
            outcome.cli_refused = entry.content.startswith(_CLI_REFUSED)
    return outcome


def blocked_calls(phone: PhoneSimulator, session: str) -> set[str]:
    """The tool ids whose result on the phone is the gate's refusal."""
    blocked = set()
    for received in phone.messages("output"):
        entry = received.message.entry
        if received.message.sessionId != session or entry.entryType != "tool_result":
            continue
        if _BLOCKED in entry.content or entry.content.startswith("Blocked:"):
            blocked.add(str((entry.metadata or {}).get("tool_use_id")))
    return blocked


def mock_mark(mock: MockAnthropic) -> tuple[int, set[str]]:
    """Where the model's requests stand: their count, and the tool results already sent."""
    count = len(mock.message_requests())
    return count, set(tool_calls(mock, max(count - 1, 0))[1])  # the last request holds them all


def new_results(mock: MockAnthropic, mark: tuple[int, set[str]]) -> list[bytes]:
    """The tool results the model received since `mark` (each request repeats the history)."""
    count, known = mark
    results = tool_calls(mock, count)[1]
    return [text.encode() for tool_id, text in results.items() if tool_id not in known]


def _request_blobs(mock: MockAnthropic, after: int) -> list[bytes]:
    return [json.dumps(r.body).encode() for r in mock.message_requests()[after:]]


async def run_scenario(
    home: RedTeamHome,
    relay_url: str,
    mock: MockAnthropic,
    server: ScriptServer,
    *,
    allow: bool,
    turn_per_attack: bool = False,
    only: Collection[str] | None = None,
) -> Observed:
    """Start the daemon in `home`, pair a phone, open a session in ``~/proj`` and send the
    attacks; every card is answered with `allow`.

    Args:
        turn_per_attack: one turn per attack, the home restored after each (slow, but each
            attack's own effects are known; and what the phone saw is known whatever the agent
            told its model); else the turns of :func:`~.attacks.all_attacks`.
        only: the ids of the attacks to make (None: all).
    """
    turns = [
        [attack for attack in turn if only is None or attack.id in only]
        for turn in all_attacks(home.home, server.url)
    ]
    async with home.daemon(relay_url, mock) as daemon:
        phone = await pair_phone(daemon, relay_url)
        try:
            sandboxed: dict[str, bool | None] = {}
            session = await open_session(phone, home.project, home.agent, sandboxed)
            canaries = {**home.canaries, **home.bridge_canaries(daemon)}
            seen: set[str] = set()
            answering = asyncio.ensure_future(answer_cards(phone, session, allow=allow, seen=seen))
            requests = len(mock.message_requests())
            posted = len(server.posted)
            before = home.snapshot()
            alone: list[Outcome] = []
            try:
                if turn_per_attack:
                    for attack in (a for turn in turns for a in turn):
                        if attack.tool in ("Write", "Edit"):  # Claude Code writes what it read
                            await run_turn(phone, session, [read_of(attack.input["file_path"])])
                        start, sent, uploads = home.snapshot(), mock_mark(mock), len(server.posted)
                        mark = phone.mark()
                        await run_turn(phone, session, [attack])
                        said = [*new_results(mock, sent), *server.posted[uploads:]]
                        alone.append(seen_on_phone(phone, session, attack, mark))
                        alone[-1].effects = effects(
                            home.home, start, home.snapshot(), canaries, output=said
                        )
                        home.restore()
                else:
                    for turn in turns:
                        await run_turn(phone, session, turn)
            finally:
                answering.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await answering
            after = home.snapshot()
            found = effects(home.home, before, after, canaries)
            calls, results = tool_calls(mock, requests)
            outcomes = alone or match_outcomes(
                turns, calls, results, seen, blocked_calls(phone, session)
            )
            return Observed(
                outcomes,
                found,
                model_leaks=leaked_in(_request_blobs(mock, requests), canaries),
                upload_leaks=leaked_in(server.posted[posted:], canaries),
                sandboxed=sandboxed[session],
            )
        finally:
            await phone.close()
