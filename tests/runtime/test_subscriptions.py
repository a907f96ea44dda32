"""The standing subscriptions follow the engine: commands while a phone is paired, pairing while
a window is open; the filters are asked again at each (re)connect, so `since` moves with time."""

from __future__ import annotations

from bridge.engine.inputs import PairingWindowRequested, PhoneUnpaired
from bridge.nostr.filters import Filter
from bridge.runtime.subscriptions import COMMANDS_SUB, PAIRING_SUB, Subscriptions
from tests.runtime.support import BRIDGE, NOW, PHONE, FakeClock, FakePool, make_engine

T = int(NOW)


async def test_subscriptions_follow_the_phones_and_the_pairing_window() -> None:
    clock, pool = FakeClock(), FakePool()
    engine = make_engine(last_seen=T - 100)
    subscriptions = Subscriptions(pool, engine, clock.wall)  # type: ignore[arg-type]

    await subscriptions.refresh()
    assert sorted(pool.subscriptions) == [COMMANDS_SUB]
    assert pool.unsubscribed == [PAIRING_SUB]
    commands = pool.subscriptions[COMMANDS_SUB]
    assert list(commands()) == [
        Filter(
            kinds=(4515,),
            authors=(PHONE.public_hex,),
            since=T - 300,  # the replay window, not older
            tags={"p": (BRIDGE.public_hex,)},
        )
    ]
    clock.advance(1_000)  # a reconnect later asks again: `since` follows the cursor and the clock
    assert [f.since for f in commands()] == [T - 105]

    engine.handle(PairingWindowRequested("tok", 300), clock.wall())
    await subscriptions.refresh()
    assert sorted(pool.subscriptions) == [COMMANDS_SUB, PAIRING_SUB]
    [pairing] = pool.subscriptions[PAIRING_SUB]()
    assert (pairing.kinds, pairing.authors, pairing.tags) == (
        (4515,),
        None,
        {"p": (BRIDGE.public_hex,)},
    )

    engine.handle(PhoneUnpaired(PHONE.public_hex), clock.wall())
    clock.advance(301)  # the window expired too
    await subscriptions.refresh()
    assert pool.subscriptions == {}
    assert pool.unsubscribed == [PAIRING_SUB, COMMANDS_SUB, PAIRING_SUB]
