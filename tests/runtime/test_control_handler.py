"""The control socket's answers, over a real engine: pairing, its waiters, phones, status,
sessions (their hosts, and ``sessions.close``)."""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest

from bridge import __version__
from bridge.control.methods import HandlerError
from bridge.engine.core import Engine
from bridge.engine.effects import Notify
from bridge.engine.inputs import (
    Input,
    PairingWindowRequested,
    PhonePairedManually,
    PhoneUnpaired,
    SessionCloseRequested,
)
from bridge.nostr.pool import RelayState
from bridge.protocol import PairRequestCommand, RefreshSessionsCommand
from bridge.runtime.edges.control_handler import DaemonControl, pair_url
from tests.runtime.support import (
    BRIDGE,
    NOW,
    PHONE,
    PHONE_2,
    RELAY_A,
    RELAY_B,
    STRANGER,
    FakeClock,
    FakePool,
    command_event,
    make_engine,
    session_record,
)

PUBLIC = "wss://relay.example.com/path"


def iso(unix: float) -> str:
    return datetime.fromtimestamp(unix, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class FakeRegistration:
    """The calls DaemonControl makes on RelayRegistration."""

    calls: list[tuple[Any, ...]] = field(default_factory=list)

    def register(self, pubkey: str, label: str = "") -> None:
        self.calls.append(("register", pubkey, label))

    def unregister(self, pubkey: str) -> None:
        self.calls.append(("unregister", pubkey))

    def open_window(self, bridge_pubkey: str, now: float, duration: float) -> None:
        self.calls.append(("open_window", bridge_pubkey, now, duration))

    def close_window(self, bridge_pubkey: str) -> None:
        self.calls.append(("close_window", bridge_pubkey))


@dataclass
class Rig:
    engine: Engine
    clock: FakeClock
    pool: FakePool
    fed: list[Input]
    registration: FakeRegistration
    changes: list[str]
    control: DaemonControl
    pending: list[int]


def make_rig(
    *,
    registration: bool = True,
    home: str = "/home/u/.codedeck",
    embedded_url: str | None = None,
    web_client_url: str | None = None,
    **engine_state: Any,
) -> Rig:
    engine, clock = make_engine(**engine_state), FakeClock()
    pool = FakePool((RELAY_A, RELAY_B))
    fed: list[Input] = []
    changes: list[str] = []
    pending = [0]
    reg = FakeRegistration()
    control = DaemonControl(
        engine=engine,
        pool=pool,  # type: ignore[arg-type]
        keypair=BRIDGE,
        machine="box one",
        home=home,
        public_relays=[PUBLIC],
        embedded_url=embedded_url,
        web_client_url=web_client_url,
        feed=fed.append,
        pending_inputs=lambda: pending[0],
        wall=clock.wall,
        registration=reg if registration else None,  # type: ignore[arg-type]
        on_change=lambda: changes.append("changed"),
    )
    return Rig(engine, clock, pool, fed, reg, changes, control, pending)


async def waiting(rig: Rig, timeout: float = 5.0) -> asyncio.Task[Any]:
    """A ``pair.wait`` call, started and waiting."""
    task = asyncio.create_task(rig.control.pair_wait(timeout))
    await asyncio.sleep(0)  # it runs up to its wait
    assert not task.done()
    return task


# --- pairing -------------------------------------------------------------------------------


async def test_pair_open_feeds_the_window_and_returns_the_link() -> None:
    rig = make_rig()
    result = await rig.control.pair_open(300)
    token = result["token"]
    assert len(token) == 32 and int(token, 16) >= 0
    assert rig.fed == [PairingWindowRequested(token, 300)]
    assert result == {
        "url": (
            f"codedeck://pair?npub={BRIDGE.npub}&relays=wss%3A%2F%2Frelay.example.com%2Fpath"
            f"&machine=box%20one&token={token}"
        ),
        "npub": BRIDGE.npub,
        "token": token,
        "relays": [PUBLIC],
        "machine": "box one",
        "expiresAt": iso(NOW + 300),
        "webUrl": None,  # no embedded relay: no page to open
    }
    assert result["url"] == pair_url(BRIDGE.npub, [PUBLIC], "box one", token)
    assert rig.registration.calls == [("open_window", BRIDGE.public_hex, NOW, 300)]
    assert (await rig.control.pair_open(300))["token"] != token  # a fresh token each time


@pytest.mark.parametrize(
    ("embedded_url", "web_client_url", "page"),
    [
        ("ws://192.168.1.20:7777", None, "http://192.168.1.20:7777/"),
        ("wss://box.example.org:7777", None, "https://box.example.org:7777/"),
        (
            "ws://192.168.1.20:7777",
            "https://codedeck.example.org/",
            "https://codedeck.example.org/",
        ),
        (None, "https://codedeck.example.org/", "https://codedeck.example.org/"),
    ],
)
async def test_the_web_link_opens_the_hosted_page_else_the_embedded_relays(
    embedded_url: str | None, web_client_url: str | None, page: str
) -> None:
    rig = make_rig(embedded_url=embedded_url, web_client_url=web_client_url)
    result = await rig.control.pair_open(300)
    token = result["token"]
    assert result["webUrl"] == (
        f"{page}#pair={BRIDGE.npub}&relays=wss%3A%2F%2Frelay.example.com%2Fpath"
        f"&machine=box%20one&token={token}"
    )


async def test_pair_wait_resolves_when_the_engine_pairs_a_phone() -> None:
    rig = make_rig()
    opened = await rig.control.pair_open(300)
    for event in rig.fed:  # the daemon's engine loop would do this
        rig.engine.handle(event, NOW)
    task = await waiting(rig)
    request = PairRequestCommand(
        npub=PHONE_2.npub, pubkeyHex=PHONE_2.public_hex, label="Pixel", token=opened["token"]
    )
    effects = rig.engine.handle(command_event(request, author=PHONE_2), NOW)
    [notify] = [e for e in effects if isinstance(e, Notify)]
    rig.changes.clear()
    rig.control.notify(notify)
    assert await task == {"paired": True, "label": "Pixel", "npub": PHONE_2.npub}
    assert rig.registration.calls[-2:] == [
        ("register", PHONE_2.public_hex, "Pixel"),
        ("close_window", BRIDGE.public_hex),  # the window it paired through closes on the relay
    ]
    assert rig.changes == ["changed"]


async def test_a_phone_paired_by_npub_leaves_the_open_window_open_on_the_relay() -> None:
    rig = make_rig()
    await rig.control.pair_open(300)
    for event in rig.fed:
        rig.engine.handle(event, NOW)
    rig.control.notify(Notify("paired", {"npub": PHONE_2.npub, "label": "Tab"}))
    assert [c[0] for c in rig.registration.calls] == ["open_window", "register"]


async def test_pair_wait_without_a_window_or_pending_input_is_no_window() -> None:
    rig = make_rig()
    assert await rig.control.pair_wait(5) == {"paired": False, "reason": "no-window"}


async def test_pair_wait_waits_for_a_window_still_in_the_queue() -> None:
    rig = make_rig()
    rig.pending[0] = 1  # pair.open fed the window; the engine has not taken it yet
    task = await waiting(rig)
    rig.control.notify(Notify("pairing-closed", {"reason": "expired"}))
    assert await task == {"paired": False, "reason": "expired"}


async def test_pair_wait_times_out_and_forgets_its_waiter() -> None:
    rig = make_rig()
    rig.engine.handle(PairingWindowRequested("tok", 300), NOW)
    assert await rig.control.pair_wait(0.01) == {"paired": False, "reason": "timeout"}
    assert rig.control._waiters == []


@pytest.mark.parametrize(
    ("close", "expected"),
    [
        ("pair-open", {"paired": False, "reason": "closed"}),  # a replaced window
        ("shutdown", {"paired": False, "reason": "closed"}),
        ("expired", {"paired": False, "reason": "expired"}),
    ],
)
async def test_every_waiter_ends_when_the_window_does(close: str, expected: dict[str, Any]) -> None:
    rig = make_rig()
    rig.engine.handle(PairingWindowRequested("tok", 300), NOW)
    first, second = await waiting(rig), await waiting(rig)
    if close == "pair-open":
        await rig.control.pair_open(60)
    elif close == "shutdown":
        rig.control.close()
    else:
        rig.control.notify(Notify("pairing-closed", {"reason": "expired"}))
    assert await first == expected and await second == expected
    closed = ("close_window", BRIDGE.public_hex) in rig.registration.calls
    assert closed is (close == "expired")  # a replaced window is re-opened; shutdown closes it


async def test_other_notifications_wake_no_one() -> None:
    rig = make_rig()
    rig.engine.handle(PairingWindowRequested("tok", 300), NOW)
    task = await waiting(rig)
    rig.control.notify(Notify("something-else", {}))
    await asyncio.sleep(0)
    assert not task.done()
    assert rig.changes == []
    rig.control.close()
    await task


async def test_a_paired_phone_without_registration_is_only_reported() -> None:
    rig = make_rig(registration=False)
    rig.engine.handle(PairingWindowRequested("tok", 300), NOW)
    task = await waiting(rig)
    rig.control.notify(Notify("paired", {"npub": PHONE_2.npub, "label": "Pixel"}))
    assert await task == {"paired": True, "label": "Pixel", "npub": PHONE_2.npub}


async def test_pair_npub_feeds_the_engine() -> None:
    rig = make_rig()
    assert await rig.control.pair_npub(PHONE.public_hex, "Mine") == {
        "npub": PHONE.npub,
        "label": "Mine",
        "alreadyPaired": True,
    }
    assert await rig.control.pair_npub(PHONE_2.public_hex, "") == {
        "npub": PHONE_2.npub,
        "label": "Phone",
        "alreadyPaired": False,
    }
    assert rig.fed == [
        PhonePairedManually(PHONE.public_hex, "Mine"),
        PhonePairedManually(PHONE_2.public_hex, "Phone"),
    ]


# --- phones --------------------------------------------------------------------------------


async def test_unpair_of_an_unknown_key_changes_nothing() -> None:
    rig = make_rig()
    assert await rig.control.phones_unpair(STRANGER.public_hex) == {
        "unpaired": False,
        "npub": STRANGER.npub,
    }
    assert rig.fed == [] and rig.registration.calls == []


async def test_unpair_of_a_paired_phone_feeds_the_engine_and_the_registry() -> None:
    rig = make_rig()
    assert await rig.control.phones_unpair(PHONE.public_hex) == {
        "unpaired": True,
        "npub": PHONE.npub,
        "label": "phone-0",
    }
    assert rig.fed == [PhoneUnpaired(PHONE.public_hex)]
    assert rig.registration.calls == [("unregister", PHONE.public_hex)]


# --- status --------------------------------------------------------------------------------


async def test_status_shape() -> None:
    rig = make_rig(sessions=[session_record("s-1", "/ws/app", title="Fix it", state="running")])
    rig.pool.states[RELAY_B] = RelayState.CLOSED
    rig.engine.handle(command_event(RefreshSessionsCommand(), created_at=NOW), NOW + 2)
    status = await rig.control.status()
    assert status == {
        "pid": os.getpid(),
        "startedAt": iso(NOW),
        "version": __version__,
        "npub": BRIDGE.npub,
        "machine": "box one",
        "home": "/home/u/.codedeck",
        "relays": [
            {"url": RELAY_A, "state": "open", "lastEventAt": None, "lastError": None},
            {"url": RELAY_B, "state": "closed", "lastEventAt": None, "lastError": None},
        ],
        "embeddedRelay": None,
        "phones": [
            {"npub": PHONE.npub, "label": "phone-0", "pairedAt": "2026-01-01T00:00:00.000Z"}
        ],
        "sessions": [
            {
                "sessionId": "s-1",
                "state": "running",
                "title": "Fix it",
                "cwd": "/ws/app",
                "host": {"alive": False, "pid": None},
            }
        ],
        "lastCommandAt": iso(NOW + 2),
        "hosts": {"running": 0},
    }


def test_status_line() -> None:
    rig = make_rig()
    rig.pool.states[RELAY_B] = RelayState.CONNECTING
    assert rig.control.status_line(3) == ("relays 1/2 connected, 1 phone(s), 3 running session(s)")


# --- sessions ------------------------------------------------------------------------------


async def test_sessions_close_one_feeds_the_engine() -> None:
    rig = make_rig(sessions=[session_record("s-1", "/ws/a"), session_record("s-2", "/ws/b")])
    assert await rig.control.sessions_close("s-2", False) == {"closed": ["s-2"]}
    assert rig.fed == [SessionCloseRequested("s-2")]


async def test_sessions_close_all_feeds_each_session_once() -> None:
    rig = make_rig(sessions=[session_record("s-1", "/ws/a"), session_record("s-2", "/ws/b")])
    assert await rig.control.sessions_close(None, True) == {"closed": ["s-1", "s-2"]}
    # asked again before the engine took the inputs: answered, not queued twice
    assert await rig.control.sessions_close("s-1", False) == {"closed": ["s-1"]}
    assert rig.fed == [SessionCloseRequested("s-1"), SessionCloseRequested("s-2")]
    for event in rig.fed:  # the engine loop
        rig.engine.handle(event, NOW)
    assert rig.engine.session_records() == []
    assert await rig.control.sessions_close(None, True) == {"closed": []}
    assert rig.control._closing == set()


async def test_sessions_close_of_an_unknown_session_is_refused() -> None:
    rig = make_rig(sessions=[session_record("s-1", "/ws/a")])
    with pytest.raises(HandlerError) as refused:
        await rig.control.sessions_close("s-\u202e9", False)
    assert str(refused.value) == ("there is no session s-?9; `codedeck-bridge sessions` lists them")
    assert rig.fed == []
