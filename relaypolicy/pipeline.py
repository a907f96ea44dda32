"""The decision function: the rules in order, the first that does not accept decides.

This is strfry-policies' ``pipeline()`` and khatru's ``RejectEvent`` list. The order is part of
the policy:

1. *what* the event is (kind allow-list, ``d`` tag, expiry) — cheap, and needs no registry;
2. *who* may write it (registered author, pairing window, gift-wrap recipient);
3. *how often* (per-IP and per-pubkey token buckets) — last, so a token is only spent on an event
   every other rule admitted.

:class:`RelayPolicy` bundles a registry, a configuration and the rate-limit state the caller owns;
the strfry plugin, the daemon's embedded relay and the tests all decide through it.

Pure: no I/O, no clock (``receivedAt`` is the time).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import orjson

from relaypolicy.config import DEFAULT_CONFIG, PolicyConfig
from relaypolicy.message import (
    ACCEPT,
    Action,
    Decision,
    PolicyInput,
    RequestError,
    is_hex64,
    parse_request,
    recover_event_id,
    serialize_response,
)
from relaypolicy.policies import (
    INVALID,
    Policy,
    PolicyContext,
    addressable_d_tag,
    allowed_kinds,
    command_expiration,
    gift_wrap_rate,
    gift_wrap_recipient,
    group_message_rate,
    pairing_rate,
    registered_author,
    writer_rate,
)
from relaypolicy.ratelimit import TokenBuckets
from relaypolicy.registry import PubkeyRegistry

__all__ = [
    "DEFAULT_POLICIES",
    "INTERNAL_ERROR",
    "Answer",
    "RelayPolicy",
    "run_pipeline",
]

DEFAULT_POLICIES: Final[tuple[Policy, ...]] = (
    allowed_kinds,
    addressable_d_tag,
    command_expiration,
    registered_author,
    gift_wrap_recipient,
    pairing_rate,
    gift_wrap_rate,
    group_message_rate,
    writer_rate,
)

#: strfry's own answer when a plugin fails; we give the same one when a rule raised.
INTERNAL_ERROR: Final = Decision(Action.REJECT, "error: internal error")


def run_pipeline(
    msg: PolicyInput, ctx: PolicyContext, policies: Sequence[Policy] = DEFAULT_POLICIES
) -> Decision:
    """Run ``policies`` in order; return the first non-accept decision, else accept."""
    for policy in policies:
        decision = policy(msg, ctx)
        if decision is not ACCEPT and not decision.accepted:
            return decision
    return ACCEPT


class RelayPolicy:
    """The relay's write policy: a registry, a configuration, and the rate-limit state.

    Args:
        registry: who is registered (see :class:`relaypolicy.registry.PubkeyRegistry`).
        config: the tunables.
        limits: rate-limit state to use; a fresh one sized by ``config`` when omitted.
        policies: the rules, in order.

    Not thread-safe: decide one event at a time (strfry does; the daemon's hook serialises).
    """

    __slots__ = ("_ctx", "_policies")

    def __init__(
        self,
        registry: PubkeyRegistry,
        config: PolicyConfig = DEFAULT_CONFIG,
        *,
        limits: TokenBuckets | None = None,
        policies: Sequence[Policy] = DEFAULT_POLICIES,
    ) -> None:
        self._ctx = PolicyContext(
            registry=registry,
            config=config,
            limits=limits if limits is not None else TokenBuckets(config.max_tracked_keys),
        )
        self._policies = tuple(policies)

    @property
    def context(self) -> PolicyContext:
        """The registry, configuration and rate-limit state decisions use."""
        return self._ctx

    def decide(self, msg: PolicyInput) -> Decision:
        """Decide on one parsed request."""
        return run_pipeline(msg, self._ctx, self._policies)

    def decide_request(self, obj: object) -> tuple[str, Decision]:
        """Decide on one decoded strfry request (a dict as strfry sends it).

        Returns:
            ``(event id, decision)``; a request that is not well formed is rejected with
            ``invalid: …`` and the id is ``""`` when it could not be read.

        Exceptions from a rule propagate: the caller logs them and answers
        :data:`INTERNAL_ERROR` (see :meth:`answer_line`).
        """
        try:
            msg = parse_request(obj)
        except RequestError as exc:
            return exc.event_id or "", Decision.reject(INVALID, exc.reason)
        return msg.event_id, self.decide(msg)

    def decide_event(
        self, event: Mapping[str, Any], *, source_ip: str, received_at: int
    ) -> tuple[str, Decision]:
        """Decide on an event received by an in-process relay (the daemon's embedded relay).

        Builds the request strfry would send for a client at ``source_ip`` (``IP6`` when it
        contains a colon, else ``IP4``) and decides on it like :meth:`decide_request`.
        """
        request = {
            "type": "new",
            "event": event,
            "receivedAt": received_at,
            "sourceType": "IP6" if ":" in source_ip else "IP4",
            "sourceInfo": source_ip,
        }
        return self.decide_request(request)

    def answer_line(self, line: bytes) -> Answer:
        """The plugin protocol in one call: one request line in, one response line out.

        Never raises for any input (other than a ``BaseException`` such as KeyboardInterrupt): a
        rule that raised is answered with :data:`INTERNAL_ERROR` and returned in
        :attr:`Answer.error` for the caller to log.
        """
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError:
            reject = Decision.reject(INVALID, "request is not valid JSON")
            event_id = recover_event_id(line) or ""
            return Answer(serialize_response(event_id, reject), event_id, reject)
        try:
            event_id, decision = self.decide_request(obj)
        except Exception as exc:
            event = obj.get("event") if isinstance(obj, dict) else None
            raw_id = event.get("id") if isinstance(event, dict) else None
            event_id = raw_id if is_hex64(raw_id) else ""
            return Answer(
                serialize_response(event_id, INTERNAL_ERROR), event_id, INTERNAL_ERROR, exc
            )
        return Answer(serialize_response(event_id, decision), event_id, decision)


@dataclass(frozen=True, slots=True)
class Answer:
    """The result of :meth:`RelayPolicy.answer_line`.

    Attributes:
        line: the response line to write (JSON and a newline).
        event_id: the id it echoes (``""`` when the request's id was unreadable).
        decision: the verdict in it.
        error: the exception a rule raised, when the verdict is :data:`INTERNAL_ERROR`.
    """

    line: bytes
    event_id: str
    decision: Decision
    error: Exception | None = None
