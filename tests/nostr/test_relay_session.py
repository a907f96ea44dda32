"""RelaySession, pure: frames in → frames, events and deadlines out (no loop, socket or sleep).

Time is whatever the test says (``T0`` monotonic, ``NOW_UNIX`` unix); outputs are asserted
exactly, log lines rendered as ``(level, prefix, text)``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bridge.nostr.event import VerifiedEvent, sign_event
from bridge.nostr.filters import Filter, matches_any
from bridge.nostr.keys import Keypair
from bridge.nostr.messages import (
    AuthResponse,
    ClientMessageError,
    CloseMessage,
    OkMessage,
    ReqMessage,
)
from bridge.nostr.nip42 import build_auth_event
from bridge.nostr.relay_session import (
    AuthFinished,
    EndOfStoredEvents,
    Log,
    OkReceived,
    RelayEventReceived,
    RelaySession,
    SendMessage,
    SessionOutput,
    SignAuth,
    SubscriptionClosed,
)

URL = "ws://relay.test"
ALICE = Keypair.from_secret("11" * 32)
NOW_UNIX = 1_800_000_000
T0 = 1_000.0
EOSE_TIMEOUT = 15.0
AUTH_TIMEOUT = 10.0
SUB = "feed"
FILTERS = (Filter(kinds=(1,), authors=(ALICE.public_hex,)),)
SINCE = NOW_UNIX - 2_000
PAGED = (Filter(kinds=(1,), authors=(ALICE.public_hex,), since=SINCE),)
"""A backlog filter with a lower bound: a capped answer's window is bisected at MIDDLE."""
MIDDLE = (SINCE + NOW_UNIX) // 2
CAP = 100


def make_event(content: str = "hi", *, kind: int = 1, created_at: int = NOW_UNIX - 100) -> Any:
    return sign_event(ALICE, kind, content, created_at=created_at, aux=bytes(32))


def new_session(**options: Any) -> RelaySession:
    return RelaySession(URL, eose_timeout=EOSE_TIMEOUT, auth_timeout=AUTH_TIMEOUT, **options)


def frame(*parts: Any) -> str:
    return json.dumps([p.to_dict() if isinstance(p, VerifiedEvent) else p for p in parts])


def feed(
    session: RelaySession, *frames: str, now: float = T0, now_unix: float = NOW_UNIX
) -> list[SessionOutput]:
    outputs: list[SessionOutput] = []
    for text in frames:
        outputs += session.receive(text, now, now_unix)
    return outputs


def render(outputs: list[SessionOutput]) -> list[Any]:
    """Log lines as (level, prefix, text); everything else as it is."""
    return [(o.level.value, o.prefix, o.text) if isinstance(o, Log) else o for o in outputs]


def effects(outputs: list[SessionOutput]) -> list[SessionOutput]:
    return [o for o in outputs if not isinstance(o, Log)]


def got(*events: VerifiedEvent, subscription_id: str = SUB) -> list[RelayEventReceived]:
    return [RelayEventReceived(URL, subscription_id, event) for event in events]


def no_eose_line(subscription_id: str) -> tuple[str, str, str]:
    return (
        "warning",
        "-",
        f"{subscription_id}: no EOSE after 15 s; going on without the rest of that answer",
    )


# --- subscriptions and events ---------------------------------------------------------------------


def test_req_then_stored_events_and_eose_deliver_oldest_first_then_live_at_once() -> None:
    session = new_session()
    assert session.subscribe(SUB, FILTERS, T0) == [SendMessage(ReqMessage(SUB, FILTERS))]
    assert session.next_deadline() == T0 + EOSE_TIMEOUT
    older = make_event("older", created_at=NOW_UNIX - 20)
    newer = make_event("newer", created_at=NOW_UNIX - 10)

    held = feed(session, frame("EVENT", SUB, newer), frame("EVENT", SUB, older))  # newest first
    assert render(held) == [
        ("debug", "<", f"EVENT feed {newer.id[:8]} kind 1"),
        ("debug", "<", f"EVENT feed {older.id[:8]} kind 1"),
    ]
    assert session.last_event_at == NOW_UNIX
    assert render(feed(session, frame("EOSE", SUB))) == [
        ("debug", "<", "EOSE feed"),
        *got(older, newer),
        EndOfStoredEvents(SUB),
    ]
    assert session.next_deadline() is None

    live = make_event("live", created_at=NOW_UNIX)
    assert effects(feed(session, frame("EVENT", SUB, live))) == got(live)
    assert feed(session, frame("EOSE", SUB)) == []  # a second EOSE means nothing


GOOD = make_event("good")
OTHER_KIND = make_event("kind 7", kind=7)

# (id, frame, the one log line that says why it was dropped)
DROPS: list[tuple[str, str, tuple[str, str, str]]] = [
    (
        "no-open-subscription",
        frame("EVENT", "someone-else", GOOD),
        ("debug", "<", f"EVENT {GOOD.id[:8]} for no open subscription"),
    ),
    (
        "not-matching-the-filters",
        frame("EVENT", SUB, OTHER_KIND),
        ("warning", "!", f"dropped event {OTHER_KIND.id[:8]}: does not match subscription feed"),
    ),
    (
        "wrong-id",
        frame("EVENT", SUB, {**GOOD.to_dict(), "content": "tampered"}),
        ("warning", "!", f"dropped event {GOOD.id[:8]}: id does not match the event content"),
    ),
    (
        "bad-signature",
        frame("EVENT", SUB, {**GOOD.to_dict(), "sig": "11" * 64}),
        ("warning", "!", f"dropped event {GOOD.id[:8]}: invalid signature"),
    ),
    (
        "not-json",
        '["EVENT", "feed", {',
        ("warning", "!", "dropped frame: frame is not valid JSON (unexpected end of data)"),
    ),
    (
        "unknown-type",
        frame("HELLO", SUB),
        ("warning", "!", "dropped frame: unknown frame type 'HELLO'"),
    ),
    (
        "too-large",
        frame("NOTICE", "x" * 2_000),
        ("warning", "!", "dropped frame: frame of 2014 bytes exceeds the 1024-byte limit"),
    ),
]


@pytest.mark.parametrize(("text", "line"), [c[1:] for c in DROPS], ids=[c[0] for c in DROPS])
def test_a_bad_or_foreign_event_is_dropped_with_a_reason(
    text: str, line: tuple[str, str, str]
) -> None:
    session = new_session(max_message_size=1_024)
    session.subscribe(SUB, FILTERS, T0)
    assert render(feed(session, text)) == [line]
    assert session.last_event_at is None
    # Not held either: the stored answer ends empty.
    assert effects(feed(session, frame("EOSE", SUB))) == [EndOfStoredEvents(SUB)]


# (id, frame, what it leads to)
QUIET: list[tuple[str, str, list[Any]]] = [
    ("notice", frame("NOTICE", "be nice"), [("info", "<", "NOTICE be nice")]),
    ("count", frame("COUNT", SUB, {"count": 3}), [("debug", "<", "COUNT feed ignored")]),
    ("eose-of-no-subscription", frame("EOSE", "gone"), []),
    ("closed-of-no-subscription", frame("CLOSED", "gone", "error: x"), []),
]


@pytest.mark.parametrize(("text", "expected"), [c[1:] for c in QUIET], ids=[c[0] for c in QUIET])
def test_frames_that_only_get_logged(text: str, expected: list[Any]) -> None:
    session = new_session()
    session.subscribe(SUB, FILTERS, T0)
    assert render(feed(session, text)) == expected
    assert session.subscription_ids == (SUB,)


def test_closed_ends_a_subscription() -> None:
    session = new_session()
    session.subscribe(SUB, FILTERS, T0)
    assert render(feed(session, frame("CLOSED", SUB, "blocked: not you"))) == [
        ("warning", "<", "CLOSED feed: blocked: not you"),
        SubscriptionClosed(SUB, "blocked: not you"),
    ]
    assert session.subscription_ids == ()
    assert session.next_deadline() is None


def test_subscribe_validates_before_registering_anything() -> None:
    session = new_session()
    with pytest.raises(ClientMessageError, match="at most 64 chars"):
        session.subscribe("x" * 65, FILTERS, T0)
    with pytest.raises(ClientMessageError, match="at least one filter"):
        session.subscribe(SUB, (), T0)
    assert session.subscription_ids == ()
    assert session.next_deadline() is None
    assert session.unsubscribe(SUB) == []


@given(st.lists(st.none() | st.booleans() | st.integers() | st.text(max_size=70), max_size=5))
def test_any_frame_is_taken_without_raising(parts: list[Any]) -> None:
    session = new_session()
    session.subscribe(SUB, FILTERS, T0)
    for kind in ("EVENT", "OK", "EOSE", "CLOSED", "AUTH", "NOTICE", "COUNT"):
        outputs = session.receive(json.dumps([kind, *parts]), T0, NOW_UNIX)
        assert all(not isinstance(o, RelayEventReceived) for o in outputs)


# --- backlog paging -------------------------------------------------------------------------------


def answer(stored: list[VerifiedEvent], filters: tuple[Filter, ...]) -> list[VerifiedEvent]:
    """What a relay with a cap of CAP sends for a REQ: the newest matches, newest first."""
    matching = [e for e in stored if matches_any(filters, e)]
    return sorted(matching, key=lambda e: e.created_at, reverse=True)[:CAP]


def answer_frames(stored: list[VerifiedEvent], req: ReqMessage) -> list[str]:
    sid = req.subscription_id
    return [frame("EVENT", sid, e) for e in answer(stored, req.filters)] + [frame("EOSE", sid)]


def serve(
    session: RelaySession, stored: list[VerifiedEvent], outputs: list[SessionOutput]
) -> list[SessionOutput]:
    """Answer every REQ among ``outputs`` (and among what follows) as that relay; all outputs."""
    seen: list[SessionOutput] = []
    queue = list(outputs)
    while queue:
        output = queue.pop(0)
        seen.append(output)
        if isinstance(output, SendMessage) and isinstance(output.message, ReqMessage):
            queue += feed(session, *answer_frames(stored, output.message))
    return seen


def sent(outputs: list[SessionOutput], kind: type[ReqMessage] | type[CloseMessage]) -> list[str]:
    return [
        o.message.subscription_id
        for o in outputs
        if isinstance(o, SendMessage) and isinstance(o.message, kind)
    ]


def oldest_first(events: list[VerifiedEvent]) -> list[VerifiedEvent]:
    return sorted(events, key=lambda e: e.created_at)


PAGE_1 = ReqMessage("feed~p1", (replace(PAGED[0], until=MIDDLE),))
PAGE_2 = ReqMessage("feed~p2", (replace(PAGED[0], since=MIDDLE + 1),))


def test_a_capped_backlog_is_fetched_over_pages_and_released_whole_oldest_first() -> None:
    stored = [make_event(f"n{n}", created_at=SINCE + 100 + 7 * n) for n in range(250)]
    session = new_session()
    session.subscribe(SUB, PAGED, T0)
    capped = feed(session, *answer_frames(stored, ReqMessage(SUB, PAGED)))
    # CAP events, as many as this relay ever sent at once: the answer may be cut, so its
    # window is bisected and the older half asked for first; the events wait.
    assert render(capped)[-3:] == [
        ("debug", "<", "EOSE feed"),
        ("info", "=", "feed: fetching stored events, page 1"),
        SendMessage(PAGE_1),
    ]
    assert effects(capped) == [SendMessage(PAGE_1)]
    assert session.subscription_ids == (SUB,)  # pages are the session's own

    rest = serve(session, stored, effects(capped))
    delivered = [o for o in rest if isinstance(o, RelayEventReceived)]
    assert delivered == got(*oldest_first(stored))  # every one once, under the parent's id
    start = rest.index(delivered[0])
    assert rest[start:] == [*delivered, EndOfStoredEvents(SUB)]  # released whole, at the end
    pages = sent(rest, ReqMessage)
    assert len(pages) > 2
    assert pages == sent(rest, CloseMessage) == [f"feed~p{n}" for n in range(1, len(pages) + 1)]
    assert session.next_deadline() is None

    live = make_event("live", created_at=NOW_UNIX)
    assert effects(feed(session, frame("EVENT", SUB, live))) == got(live)


def test_a_relay_whose_cap_is_known_answers_whole_below_it() -> None:
    # The daemon's own relay, in process: every answer below its cap is complete, so the
    # capped-looking answer above is taken whole, without a page.
    stored = [make_event(f"n{n}", created_at=SINCE + 100 + 7 * n) for n in range(250)]
    session = new_session()
    session.trust_answers_below(20_000)
    out = serve(session, stored, session.subscribe(SUB, PAGED, T0))
    assert sent(out, ReqMessage) == [SUB]
    assert effects(out)[1:] == [*got(*oldest_first(answer(stored, PAGED))), EndOfStoredEvents(SUB)]
    # An answer as large as the known cap may be cut: it is still paged.
    session = new_session()
    session.trust_answers_below(CAP)
    session.subscribe(SUB, PAGED, T0)
    capped = feed(session, *answer_frames(stored, ReqMessage(SUB, PAGED)))
    assert effects(capped) == [SendMessage(PAGE_1)]
    with pytest.raises(ValueError):
        session.trust_answers_below(0)


def test_a_filter_with_a_limit_is_never_paged() -> None:
    limited = (replace(PAGED[0], limit=CAP),)
    stored = [make_event(f"n{n}", created_at=SINCE + n) for n in range(2 * CAP)]
    session = new_session()
    out = serve(session, stored, session.subscribe(SUB, limited, T0))
    assert sent(out, ReqMessage) == [SUB]
    assert effects(out)[1:] == [*got(*oldest_first(stored[CAP:])), EndOfStoredEvents(SUB)]


# Window A = [SINCE, MIDDLE] (page 1) and B = [MIDDLE + 1, now] (page 2), 60 events each: the
# first answer holds B and the 40 newest of A.
OLDER = [make_event(f"a{n}", created_at=MIDDLE - 600 + 10 * n) for n in range(60)]
NEWER = [make_event(f"b{n}", created_at=MIDDLE + 1 + 10 * n) for n in range(60)]
T1 = T0 + 1


def on_page_1(session: RelaySession) -> None:
    session.subscribe(SUB, PAGED, T0)
    out = feed(session, *answer_frames(OLDER + NEWER, ReqMessage(SUB, PAGED)), now=T1)
    assert effects(out) == [SendMessage(PAGE_1)]


def page_deadline(session: RelaySession) -> list[SessionOutput]:
    assert session.next_deadline() == T1 + EOSE_TIMEOUT
    assert session.tick(T1 + EOSE_TIMEOUT - 0.001, NOW_UNIX) == []  # just before: nothing
    return session.tick(T1 + EOSE_TIMEOUT, NOW_UNIX)


def page_closed(session: RelaySession) -> list[SessionOutput]:
    return feed(session, frame("CLOSED", "feed~p1", "error: too busy"))


# (id, how page 1 ends without an answer, what that leads to)
UNANSWERED_PAGES: list[tuple[str, Callable[[RelaySession], list[SessionOutput]], list[Any]]] = [
    (
        "no-eose-by-the-deadline",
        page_deadline,
        [no_eose_line("feed~p1"), SendMessage(CloseMessage("feed~p1"))],
    ),
    ("refused-by-closed", page_closed, [("warning", "<", "CLOSED feed~p1: error: too busy")]),
]


@pytest.mark.parametrize(
    ("end_page", "ending"),
    [c[1:] for c in UNANSWERED_PAGES],
    ids=[c[0] for c in UNANSWERED_PAGES],
)
def test_a_page_without_an_answer_skips_its_window_and_the_backlog_goes_on(
    end_page: Callable[[RelaySession], list[SessionOutput]], ending: list[Any]
) -> None:
    session = new_session()
    on_page_1(session)
    assert render(end_page(session)) == [
        *ending,
        ("info", "=", "feed: fetching stored events, page 2"),
        SendMessage(PAGE_2),
    ]
    rest = serve(session, OLDER + NEWER, [SendMessage(PAGE_2)])
    # Page 2 is below the cap: complete. The 20 oldest of A were only in page 1's window.
    assert effects(rest) == [
        SendMessage(PAGE_2),
        SendMessage(CloseMessage("feed~p2")),
        *got(*oldest_first(OLDER[20:] + NEWER)),
        EndOfStoredEvents(SUB),
    ]
    assert session.subscription_ids == (SUB,)


def test_live_events_during_paging_wait_for_the_backlog_and_do_not_count_as_stored() -> None:
    session = new_session()
    on_page_1(session)
    live = [make_event(f"live{n}", created_at=NOW_UNIX + n) for n in range(CAP)]
    assert effects(feed(session, *[frame("EVENT", SUB, e) for e in live])) == []
    # Page 1 holds 60 stored events: below the cap, whatever arrived live meanwhile.
    page_1 = feed(session, *answer_frames(OLDER + NEWER, PAGE_1))
    assert effects(page_1) == [SendMessage(CloseMessage("feed~p1")), SendMessage(PAGE_2)]
    rest = effects(serve(session, OLDER + NEWER, [SendMessage(PAGE_2)]))
    assert rest[2:] == [*got(*OLDER, *NEWER, *live), EndOfStoredEvents(SUB)]


def test_closing_or_replacing_a_subscription_closes_its_pages() -> None:
    session = new_session()
    on_page_1(session)
    assert session.unsubscribe("feed~p1") == []  # not the caller's to close
    assert session.subscribe(SUB, FILTERS, T1) == [
        SendMessage(CloseMessage("feed~p1")),
        SendMessage(ReqMessage(SUB, FILTERS)),
    ]
    on_page_1(session)
    assert session.unsubscribe(SUB) == [
        SendMessage(CloseMessage(SUB)),
        SendMessage(CloseMessage("feed~p1")),
    ]
    assert session.subscription_ids == ()
    assert session.next_deadline() is None
    late = feed(session, frame("EVENT", "feed~p1", OLDER[0]), frame("EOSE", "feed~p1"))
    assert render(late) == [("debug", "<", f"EVENT {OLDER[0].id[:8]} for no open subscription")]


# --- the EOSE deadline ----------------------------------------------------------------------------


def test_a_relay_that_never_sends_eose_is_cut_off_exactly_at_the_deadline() -> None:
    session = new_session()
    session.subscribe(SUB, FILTERS, T0)
    stored = make_event("stored")
    assert effects(feed(session, frame("EVENT", SUB, stored), now=T0 + 1)) == []
    deadline = T0 + EOSE_TIMEOUT
    assert session.next_deadline() == deadline
    assert session.tick(deadline - 0.001, NOW_UNIX) == []
    assert session.tick(deadline - 0.001, NOW_UNIX) == []
    assert render(session.tick(deadline, NOW_UNIX)) == [
        no_eose_line(SUB),
        *got(stored),
        EndOfStoredEvents(SUB),
    ]
    assert session.next_deadline() is None
    assert session.tick(deadline + 100, NOW_UNIX) == []
    assert feed(session, frame("EOSE", SUB)) == []  # too late: already ended
    live = make_event("live", created_at=NOW_UNIX)
    assert effects(feed(session, frame("EVENT", SUB, live))) == got(live)


def test_an_answer_cut_off_by_the_deadline_is_not_bisected() -> None:
    # However full, an answer without EOSE proves nothing about the relay's cap: released.
    stored = [make_event(f"n{n}", created_at=SINCE + n) for n in range(CAP)]
    session = new_session()
    session.subscribe(SUB, PAGED, T0)
    assert effects(feed(session, *[frame("EVENT", SUB, e) for e in stored])) == []
    outputs = session.tick(T0 + EOSE_TIMEOUT, NOW_UNIX)
    assert effects(outputs) == [*got(*stored), EndOfStoredEvents(SUB)]


def test_next_deadline_is_the_earliest_of_all() -> None:
    session = new_session()
    assert session.next_deadline() is None
    session.subscribe("late", FILTERS, T0 + 5)
    session.subscribe("early", FILTERS, T0)
    assert session.next_deadline() == T0 + EOSE_TIMEOUT
    session.authenticate(T0 + 1, timeout=2.0)
    assert session.next_deadline() == T0 + 3
    feed(session, frame("EOSE", "early"))
    assert session.unsubscribe("early") == [SendMessage(CloseMessage("early"))]
    assert session.next_deadline() == T0 + 3
    assert render(session.tick(T0 + 3, NOW_UNIX)) == [
        ("warning", "!", "asked for AUTH but sent no challenge"),
        AuthFinished(False),
    ]
    assert session.next_deadline() == T0 + 5 + EOSE_TIMEOUT


# --- NIP-42 ---------------------------------------------------------------------------------------

AUTH_EVENT = build_auth_event(ALICE, URL, "c1", created_at=NOW_UNIX)
READ_REFUSED = "auth-required: read"


T_CLOSED = T0 + 10
"""The relay refuses the REQ late enough that the AUTH deadline falls after the EOSE one."""


def closed_for_auth(session: RelaySession, *, challenge: bool = True) -> list[SessionOutput]:
    if challenge:
        assert render(feed(session, frame("AUTH", "c1"))) == [("debug", "<", "AUTH challenge")]
    session.subscribe(SUB, FILTERS, T0)
    return feed(session, frame("CLOSED", SUB, READ_REFUSED), now=T_CLOSED)


AUTHENTICATING = ("info", "<", "CLOSED feed: auth-required, authenticating")


def test_closed_auth_required_sends_auth_once_then_the_same_req_again() -> None:
    session = new_session()
    assert render(closed_for_auth(session)) == [AUTHENTICATING, SignAuth("c1")]
    assert session.next_deadline() == T_CLOSED + AUTH_TIMEOUT  # the EOSE deadline waits for AUTH
    assert session.auth_signed(AUTH_EVENT, T_CLOSED + 1) == [SendMessage(AuthResponse(AUTH_EVENT))]
    assert session.next_deadline() == T_CLOSED + 1 + AUTH_TIMEOUT  # now for the OK
    assert not session.authenticated

    accepted = feed(session, frame("OK", AUTH_EVENT.id, True, ""), now=T_CLOSED + 2)
    assert render(accepted) == [
        ("info", "=", "authenticated (NIP-42)"),
        AuthFinished(True),
        SendMessage(ReqMessage(SUB, FILTERS)),
    ]
    assert session.authenticated
    assert session.next_deadline() == T_CLOSED + 2 + EOSE_TIMEOUT  # the new REQ's answer

    # Refused again: no second AUTH, the subscription is over.
    again = feed(session, frame("CLOSED", SUB, "auth-required: still no"))
    assert render(again) == [
        ("warning", "<", "CLOSED feed: auth-required: still no"),
        SubscriptionClosed(SUB, "auth-required: still no"),
    ]
    assert session.subscription_ids == ()


def test_a_challenge_that_comes_after_the_closed_is_answered_then() -> None:
    session = new_session()
    assert render(closed_for_auth(session, challenge=False)) == [AUTHENTICATING]
    assert render(feed(session, frame("AUTH", "c1"))) == [
        ("debug", "<", "AUTH challenge"),
        SignAuth("c1"),
    ]


def auth_refused(session: RelaySession) -> list[SessionOutput]:
    session.auth_signed(AUTH_EVENT, T_CLOSED)
    return feed(session, frame("OK", AUTH_EVENT.id, False, "auth-required: bad sig"))


def auth_ok_never_came(session: RelaySession) -> list[SessionOutput]:
    session.auth_signed(AUTH_EVENT, T_CLOSED)
    assert session.tick(T_CLOSED + AUTH_TIMEOUT - 0.001, NOW_UNIX) == []
    return session.tick(T_CLOSED + AUTH_TIMEOUT, NOW_UNIX)


def challenge_never_came(session: RelaySession) -> list[SessionOutput]:
    assert session.tick(T_CLOSED + AUTH_TIMEOUT - 0.001, NOW_UNIX) == []
    return session.tick(T_CLOSED + AUTH_TIMEOUT, NOW_UNIX)


# (id, whether the relay sent a challenge, how the AUTH fails, the log line that says so)
AUTH_FAILURES: list[tuple[str, bool, Callable[[RelaySession], list[SessionOutput]], Any]] = [
    ("refused", True, auth_refused, ("warning", "!", "AUTH rejected: auth-required: bad sig")),
    (
        "no-ok",
        True,
        auth_ok_never_came,
        ("warning", "-", f"no OK for AUTH {AUTH_EVENT.id[:8]} within 10 s"),
    ),
    (
        "no-challenge",
        False,
        challenge_never_came,
        ("warning", "!", "asked for AUTH but sent no challenge"),
    ),
]


@pytest.mark.parametrize(
    ("challenge", "fail", "line"), [c[1:] for c in AUTH_FAILURES], ids=[c[0] for c in AUTH_FAILURES]
)
def test_a_failed_auth_reports_the_subscription_closed(
    challenge: bool, fail: Callable[[RelaySession], list[SessionOutput]], line: Any
) -> None:
    session = new_session()
    closed_for_auth(session, challenge=challenge)
    assert render(fail(session)) == [
        line,
        AuthFinished(False),
        SubscriptionClosed(SUB, READ_REFUSED),
    ]
    assert session.subscription_ids == ()
    assert session.next_deadline() is None
    assert not session.authenticated


def test_authenticate_for_a_publish_runs_one_attempt_and_answers_a_challenge_once() -> None:
    session = new_session()
    assert session.authenticate(T0) == []  # no challenge yet: wait for one
    assert session.authenticate(T0 + 1) == []  # joins the attempt under way
    assert session.next_deadline() == T0 + AUTH_TIMEOUT
    assert effects(feed(session, frame("AUTH", "c1"))) == [SignAuth("c1")]
    session.auth_signed(AUTH_EVENT, T0 + 2)
    assert effects(feed(session, frame("OK", AUTH_EVENT.id, True, ""))) == [AuthFinished(True)]
    assert session.authenticate(T0 + 3) == [AuthFinished(True)]  # answered already: no AUTH
    assert effects(feed(session, frame("AUTH", "c2"))) == []  # remembered, not answered yet
    assert not session.authenticated
    assert session.authenticate(T0 + 4, timeout=3.0) == [SignAuth("c2")]
    assert session.next_deadline() == T0 + 7


def test_auth_signed_refuses_what_was_not_asked_for() -> None:
    session = new_session()
    with pytest.raises(RuntimeError, match="no AUTH event was asked for"):
        session.auth_signed(AUTH_EVENT, T0)
    feed(session, frame("AUTH", "c2"))
    assert session.authenticate(T0) == [SignAuth("c2")]
    with pytest.raises(ValueError, match="does not answer the pending challenge"):
        session.auth_signed(AUTH_EVENT, T0)  # signed for c1


# --- OK bookkeeping -------------------------------------------------------------------------------


def test_an_ok_reaches_its_waiters_and_an_unknown_one_is_ignored() -> None:
    session = new_session()
    event = make_event()
    ok = frame("OK", event.id, True, "")
    unknown = [("debug", "<", f"OK for unknown {event.id[:8]}")]
    assert render(feed(session, ok)) == unknown
    session.expect_ok(event.id)
    session.expect_ok(event.id)  # two publishers of one event share its OK
    assert feed(session, ok) == [OkReceived(OkMessage(event.id, True, ""))]
    assert session.release_ok(event.id) is False
    assert session.release_ok(event.id) is True
    assert render(feed(session, ok)) == unknown
    assert session.release_ok(event.id) is True  # releasing twice is harmless
