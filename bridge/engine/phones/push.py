"""The engine's side of Web Push (additive, capability ``push``; PROTOCOL.md §18).

Two jobs:

- **Subscriptions.** ``push-subscribe`` keeps the sending phone's subscription (the author is
  the phone, never a payload claim), ``push-unsubscribe`` forgets one of its own; both answer
  ``push-ack`` to the sender only. A subscription is checked before it is kept: the endpoint
  must pass the base-URL rule of §13 (https, or http to this machine only: a push carries a
  VAPID signature and a phone's wake-up, neither of which should cross a network in clear), and
  the keys must be what a browser makes (a 65-byte P-256 point, a 16-byte secret), so a broken
  one is refused at once with a reason instead of failing at every push. Unpairing a phone
  forgets its subscriptions (:mod:`~bridge.engine.phones.pairing`).
- **Events.** What wakes a phone is read off the lines the engine commits, so that no path that
  shows a card or ends a turn can forget to: a permission card (``permission_request``), a plan
  to approve (``plan_approval``), a question card (its first ``ask_question`` line), a turn's end
  (``stream_end``) and a session that died (``session_died``). Each becomes one
  :class:`~bridge.engine.effects.WakePhones` after the effects that committed it; who is
  subscribed, who is connected and the coalescing are the runtime's
  (:mod:`bridge.runtime.edges.push`). Sessions of the editor's tasks wake nobody: their cards
  are the editor's to answer.

Pure: no clock, no I/O.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from typing import Final

from bridge.engine.effects import (
    AppendTranscript,
    Commit,
    DeletePushSubscription,
    Effect,
    Publish,
    SavePushSubscription,
    WakePhones,
)
from bridge.engine.host import EngineConfig
from bridge.engine.phones.paired import PhoneBook
from bridge.engine.state import SessionTable
from bridge.protocol import (
    PushAckMessage,
    PushReason,
    PushSubscribeCommand,
    PushUnsubscribeCommand,
    base_url_allowed,
)

__all__ = [
    "MAX_ENDPOINT_LENGTH",
    "PUSH_ENDPOINT_ERROR",
    "PUSH_OFF_ERROR",
    "Push",
    "wake_reason",
]

PUSH_ENDPOINT_ERROR: Final = (
    "Push endpoint must be https:// (http:// is allowed only for localhost, 127.0.0.1 or [::1])"
)
PUSH_OFF_ERROR: Final = "Push is turned off on this bridge"
MAX_ENDPOINT_LENGTH: Final = 2048
_POINT_LENGTH: Final = 65
_AUTH_LENGTH: Final = 16
_CARD_LINES: Final[dict[str, PushReason]] = {
    "permission_request": "approval",
    "plan_approval": "plan",
    "ask_question": "question",
}


def _b64url(text: str) -> bytes | None:
    cleaned = text.strip().replace("+", "-").replace("/", "_").rstrip("=")
    try:
        return base64.urlsafe_b64decode(cleaned + "=" * (-len(cleaned) % 4))
    except (binascii.Error, ValueError):
        return None


def _subscription_problem(endpoint: str, p256dh: str, auth: str) -> str | None:
    """Why a subscription cannot be kept, or None."""
    if len(endpoint) > MAX_ENDPOINT_LENGTH:
        return f"Push endpoint is too long (at most {MAX_ENDPOINT_LENGTH} characters)"
    if not base_url_allowed(endpoint):
        return PUSH_ENDPOINT_ERROR
    point = _b64url(p256dh)
    if point is None or len(point) != _POINT_LENGTH or point[0] != 4:
        return "keys.p256dh must be a P-256 public key (65 bytes, base64url)"
    secret = _b64url(auth)
    if secret is None or len(secret) != _AUTH_LENGTH:
        return f"keys.auth must be {_AUTH_LENGTH} bytes (base64url)"
    return None


def wake_reason(line: AppendTranscript) -> tuple[PushReason, str | None] | None:
    """Whether a committed line wakes phones: its reason and card request id, or None."""
    metadata = line.entry.metadata
    if not metadata:
        return None
    special = metadata.get("special")
    if isinstance(special, str) and special in _CARD_LINES:
        if special == "ask_question" and metadata.get("question_index", 0) != 0:
            return None  # one card, however many questions it asks
        request = metadata.get("tool_use_id")
        return _CARD_LINES[special], request if isinstance(request, str) else None
    if special == "session_died":
        return "session-died", None
    if metadata.get("stream_end") is True:
        return "turn-ended", None
    return None


class Push:
    """Push subscriptions and wake-ups (see the module docstring).

    Args:
        config: host facts; ``push_key`` None means push is off.
        sessions: to tell the editor's task sessions apart.
        phones: the paired phones (everyone a wake-up may reach).
    """

    def __init__(self, config: EngineConfig, sessions: SessionTable, phones: PhoneBook) -> None:
        self._enabled = config.push_key is not None
        self._sessions = sessions
        self._phones = phones

    def subscribe(self, command: PushSubscribeCommand, phone: str) -> list[Effect]:
        subscription = command.subscription
        endpoint = subscription.endpoint
        problem = (
            PUSH_OFF_ERROR
            if not self._enabled
            else _subscription_problem(endpoint, subscription.keys.p256dh, subscription.keys.auth)
        )
        if problem is not None:
            return [Commit((), outbox=(self._ack(endpoint, phone, problem),))]
        save = SavePushSubscription(
            phone, endpoint, subscription.keys.p256dh.strip(), subscription.keys.auth.strip()
        )
        return [Commit((save,), outbox=(self._ack(endpoint, phone),))]

    def unsubscribe(self, command: PushUnsubscribeCommand, phone: str) -> list[Effect]:
        """Forget the phone's subscription of that endpoint (a success also when it had none)."""
        forget = DeletePushSubscription(phone, command.endpoint)
        return [Commit((forget,), outbox=(self._ack(command.endpoint, phone),))]

    @staticmethod
    def _ack(endpoint: str, phone: str, error: str | None = None) -> Publish:
        ack = PushAckMessage(endpoint=endpoint, success=error is None, error=error)
        return Publish(ack, (phone,))

    def with_wakes(self, effects: list[Effect]) -> list[Effect]:
        """`effects`, followed by a ``WakePhones`` for each line among them that wakes phones."""
        if not self._enabled or not self._phones:
            return effects
        wakes = self._wakes(effects)
        return [*effects, *wakes] if wakes else effects

    def _wakes(self, effects: Sequence[Effect]) -> list[Effect]:
        wakes: list[Effect] = []
        for effect in effects:
            if not isinstance(effect, Commit):
                continue
            for op in effect.ops:
                if not isinstance(op, AppendTranscript):
                    continue
                found = wake_reason(op)
                if found is None or self._is_task(op.session_id):
                    continue
                reason, request = found
                card = (op.session_id, request) if request is not None else None
                wakes.append(WakePhones(reason, self._phones.audience(), card))
        return wakes

    def _is_task(self, session_id: str) -> bool:
        state = self._sessions.get(session_id)
        return state is not None and state.record.task is not None
