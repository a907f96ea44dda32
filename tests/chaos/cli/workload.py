"""The inputs of a real-CLI chaos run, the phone's answers to cards, and the waits.

The mix depends on the session's mode now (the phone swaps the two sessions' modes now and then,
:meth:`Workload.swap_modes`, only while both are settled):

* ``default``: a Bash call that appends to the ledger inside the workspace (the gate allows it
  without a card: the ``PreToolUse`` check is answered by the daemon), one that appends to the
  ledger outside the workspace (the ``outside_workspace`` floor: a card), or a plain reply;
* ``acceptEdits``: a Bash call (always a card), or a plain reply.

A card is answered *allow*, or — for about one in four, decided when the input is sent and
recorded as the intention — *deny* on purpose. :meth:`Workload.answer_cards` is the phone's user:
a background task that answers every card as it shows up, except the cards a fault holds to
answer itself after a kill. A card for an input that should not have needed one is recorded
(:attr:`~tests.chaos.cli.ledger.Ledger.unexpected_cards`) and allowed, so the run goes on.

:meth:`Workload.settle` waits until every input sent so far is acknowledged and its turn was
seen ended — its ``done`` text, then the end of a turn after it — or reported interrupted on the
phone. When nothing moves for a while it asks for a
sync of the sessions still owing something, as a phone does when it comes back to a session;
an input still unsettled at the timeout is an incident, reported and left out of later waits.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import random
import time
from collections.abc import Sequence
from typing import Any

from bridge.protocol import InputCommand, ModeCommand, PermissionResCommand
from tests.chaos.cli.ledger import CardAnswer, InputRecord, Ledger, Route
from tests.chaos.cli.model import ModelCall, Prompt, prompt_text
from tests.chaos.cli.observe import Card, PhoneWatch
from tests.chaos.cli.world import SESSION_MODES, World
from tests.support.phone import PhoneError, PhoneSimulator

__all__ = ["DENY_RATE", "Workload"]

DENY_RATE = 0.25
"""Share of card inputs the phone denies on purpose."""
_STALL = 8.0
"""Seconds without progress before a settle asks for a sync."""


class Workload:
    """Sends inputs, answers cards, waits for outcomes (see the module docstring)."""

    def __init__(self, world: World, ledger: Ledger, watch: PhoneWatch, rng: random.Random) -> None:
        self.world = world
        self.ledger = ledger
        self.watch = watch
        self.rng = rng
        self.round = 0
        self.held: set[str] = set()
        """Input ids whose cards the answerer leaves to a fault."""
        self.skip_cards: set[str] = set()
        """tool_use ids nobody answers (a card whose host died, left as a user would)."""
        self.answered: set[str] = set()
        self.overdue: set[str] = set()
        self._serial = 0

    @property
    def phone(self) -> PhoneSimulator:
        return self.world.require_phone()

    @property
    def sessions(self) -> list[str]:
        return self.world.sessions

    def mode(self, session_id: str) -> str:
        return self.ledger.sessions[session_id]

    # --- sending ----------------------------------------------------------------------------------

    def next_id(self) -> str:
        self._serial += 1
        return f"cc-{self._serial:06d}"

    def random_route(self, session_id: str, *, tool: bool = False) -> Route:
        roll = self.rng.random()
        if self.mode(session_id) == "default":
            if tool:
                return Route.AUTO if roll < 0.7 else Route.CARD
            return Route.AUTO if roll < 0.5 else Route.CARD if roll < 0.7 else Route.REPLY
        return Route.CARD if tool or roll < 0.7 else Route.REPLY

    def _command(self, session_id: str, route: Route, input_id: str) -> str | None:
        if route is Route.REPLY:
            return None
        if route is Route.AUTO:
            target = self.world.inside_ledger
        elif self.mode(session_id) == "default":
            target = self.world.outside_ledger  # the outside_workspace floor asks
        else:  # acceptEdits asks for any command: either ledger
            target = self.rng.choice((self.world.inside_ledger, self.world.outside_ledger))
        return f"echo {input_id} >> {target}"

    async def send(
        self,
        session_id: str,
        route: Route | None = None,
        *,
        allow: bool | None = None,
        slow: float = 0.0,
        held: bool = False,
        note: str = "",
    ) -> InputRecord | None:
        """Send one input (a random route of the session's mix unless given); None if no relay
        took it (an incident)."""
        route = route if route is not None else self.random_route(session_id)
        input_id = self.next_id()
        if allow is None:
            allow = not (route is Route.CARD and self.rng.random() < DENY_RATE)
        prompt = Prompt(input_id, self._command(session_id, route, input_id), slow)
        text = prompt_text(prompt)
        record = InputRecord(
            input_id,
            session_id,
            text,
            route,
            allow,
            slow,
            self.round,
            0.0,
            self.mode(session_id),
            note,
            held,
        )
        if held:
            self.held.add(input_id)
        try:
            await self.phone.send(
                InputCommand(sessionId=session_id, text=text, inputId=input_id), timeout=15
            )
        except (PhoneError, TimeoutError) as exc:
            self.ledger.incident(self.round, f"{input_id} could not be published: {exc}")
            self.held.discard(input_id)
            return None
        record.sent_at = time.monotonic()
        self.ledger.add_input(record)
        return record

    async def send_some(self, count: int, sessions: Sequence[str] | None = None) -> None:
        """`count` inputs of the mix, back to back, into random sessions (of `sessions`)."""
        for _ in range(count):
            await self.send(self.rng.choice(list(sessions or self.sessions)))

    async def swap_modes(self, timeout: float = 30.0) -> None:
        """Swap the modes of the (settled) sessions, each confirmed: there is always one session
        in each mode of :data:`SESSION_MODES`, and each has just changed its mode."""
        for session_id in self.sessions:
            old = self.mode(session_id)
            new = next(m for m in SESSION_MODES if m != old)
            mark = self.phone.mark()
            try:
                await self.phone.send(ModeCommand(sessionId=session_id, mode=new), timeout=15)
                await self.phone.wait_for(
                    "mode-confirmed",
                    functools.partial(_confirms, session_id, new),
                    after=mark,
                    timeout=timeout,
                )
            except (PhoneError, TimeoutError) as exc:
                self.ledger.incident(self.round, f"mode {new} for {session_id[:8]} failed: {exc}")
                continue
            self.ledger.sessions[session_id] = new
            self.ledger.mode_switches += 1
            self.ledger.log(self.round, f"{session_id[:8]} switched from {old} to {new}")

    # --- the phone's user -------------------------------------------------------------------------

    def _due_cards(self) -> list[Card] | None:
        self.watch.update()
        due = [
            card
            for card in self.watch.cards.values()
            if card.tool_use_id not in self.answered
            and card.tool_use_id not in self.skip_cards
            and card.input_id not in self.held
        ]
        return due or None

    async def answer_cards(self) -> None:
        """Answer every card as it shows up (a background task; cancel it to stop)."""
        while True:
            due = await self.phone.wait_until(self._due_cards, timeout=3600, what="a card")
            for card in due:
                await self.answer(card, by="answerer")

    async def answer(self, card: Card, *, by: str) -> None:
        """Answer `card` with the intention of its input (allow an unexpected card)."""
        if card.tool_use_id in self.answered:
            return
        self.answered.add(card.tool_use_id)
        record = self.ledger.inputs.get(card.input_id or "")
        if record is None or record.route is not Route.CARD:
            what = record.describe() if record is not None else f"tool_use {card.tool_use_id}"
            self.ledger.unexpected_cards.append(f"r{self.round} card for {what}")
            allow = True
        else:
            allow = record.allow
        command = PermissionResCommand(
            sessionId=card.session_id, requestId=card.tool_use_id, allow=allow
        )
        try:
            await self.phone.send(command, timeout=15)
        except (PhoneError, TimeoutError) as exc:
            self.ledger.incident(self.round, f"answer to {card.tool_use_id} not published: {exc}")
            return
        self.ledger.answers.append(
            CardAnswer(card.tool_use_id, card.input_id, allow, time.monotonic(), by)
        )

    # --- waits ------------------------------------------------------------------------------------

    def unsettled(self, session_id: str | None = None) -> list[InputRecord]:
        self.watch.update()
        return [
            r
            for r in self.ledger.inputs.values()
            if not self.watch.settled(r.input_id)
            and r.input_id not in self.overdue
            and (session_id is None or r.session_id == session_id)
        ]

    def in_flight(self) -> tuple[str, ...]:
        return tuple(r.input_id for r in self.unsettled())

    async def settle(self, timeout: float) -> bool:
        """Wait until every input has its outcome on the phone (see the module docstring)."""
        deadline = time.monotonic() + timeout
        last = len(self.unsettled())
        quiet_since = time.monotonic()
        while True:
            left = self.unsettled()
            if not left:
                return True
            if len(left) < last:
                last, quiet_since = len(left), time.monotonic()
            now = time.monotonic()
            if now > deadline:
                shown = ", ".join(r.describe() for r in left[:4])
                self.ledger.incident(
                    self.round,
                    f"{len(left)} input(s) without an outcome after {timeout:g} s: {shown}",
                )
                self.overdue.update(r.input_id for r in left)
                return False
            if now - quiet_since > _STALL:
                quiet_since = now
                for session_id in sorted({r.session_id for r in left}):
                    self.ledger.stall_syncs += 1
                    try:
                        await self.phone.sync(session_id, wait=False)
                    except PhoneError as exc:
                        self.ledger.incident(self.round, f"sync request failed: {exc}")
            with contextlib.suppress(TimeoutError):
                await self.phone.wait_until(
                    functools.partial(self._fewer, len(left)), timeout=1.0, what="progress"
                )

    def _fewer(self, count: int) -> bool:
        return len(self.unsettled()) < count

    async def wait_call(
        self, input_id: str, *, after: int, timeout: float = 30.0, result: bool = False
    ) -> ModelCall | None:
        """The first request from index `after` on that shows `input_id`'s prompt (or, with
        `result`, its Bash result) to the model; None after `timeout` (an incident)."""
        deadline = time.monotonic() + timeout
        mock = self.world.mock
        while time.monotonic() < deadline:
            for call in mock.calls(after):
                if input_id in (call.results if result else call.prompts):
                    return call
            await asyncio.sleep(0.002)
        what = "result" if result else "prompt"
        self.ledger.incident(self.round, f"the model never saw the {what} of {input_id}")
        return None

    async def wait_reply(self, call: ModelCall, timeout: float = 30.0) -> float | None:
        """When the model's reply to `call` was written; None after `timeout` (an incident)."""
        deadline = time.monotonic() + timeout
        while call.replied_at is None and time.monotonic() < deadline:
            await asyncio.sleep(0.002)
        if call.replied_at is None:
            self.ledger.incident(self.round, f"the model never finished a reply ({call.prompts})")
        return call.replied_at

    async def wait_marked(self, input_id: str, timeout: float = 30.0) -> bool:
        """Wait until the Bash call of `input_id` left its marker; False after `timeout`."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.world.marked(input_id):
                return True
            await asyncio.sleep(0.003)
        self.ledger.incident(self.round, f"{input_id} never left its marker in {timeout:g} s")
        return False

    async def wait_card(self, input_id: str, timeout: float = 30.0) -> Card | None:
        """The card of `input_id` on the phone; None after `timeout` (an incident)."""

        def found() -> Card | None:
            self.watch.update()
            return self.watch.card_for(input_id)

        try:
            return await self.phone.wait_until(found, timeout=timeout, what=f"card of {input_id}")
        except TimeoutError:
            self.ledger.incident(self.round, f"no card for {input_id} within {timeout:g} s")
            return None

    async def wait_restart_note(self, session_id: str, count: int, timeout: float = 45.0) -> bool:
        """Wait until the phone holds more than `count` restart notes of `session_id`."""

        def more() -> bool:
            self.watch.update()
            return len(self.watch.restarts_of(session_id)) > count

        try:
            await self.phone.wait_until(more, timeout=timeout, what="a session_restart note")
            return True
        except TimeoutError:
            self.ledger.incident(
                self.round, f"no session_restart note for {session_id[:8]} within {timeout:g} s"
            )
            return False


def _confirms(session_id: str, mode: str, message: Any) -> bool:
    return bool(message.sessionId == session_id and message.mode == mode)
