"""CodeDeck Web's numbers in a real browser, side by side with the Python phone simulator.

One daemon (``codedeck-bridge run``, scripted agent) serves its embedded relay and the web app
on one port, as ``make run`` does; Debian's Chromium (:mod:`tests.support.browser`, 375×812)
opens it. In the same run, on the same bridge:

(a) **pairing**: a fresh pairing window's link opened in a fresh browser profile → the bridge
    listed as paired and online (page load, key generation, ``pair-request``, ``pair-ack``,
    first heartbeat); baseline: the phone simulator's ``pair`` → ``pair-ack`` → first heartbeat.
(b) **a 5,000-entry session opened**: the session's route loaded in that browser (nothing held
    in IndexedDB yet) → 5,000 entry rows in the DOM; baseline: a freshly paired simulator's
    ``sync-request`` → every entry held (the sync complete).
(c) **first load size**: gzip (level 9) of ``index.html`` + ``app.js`` + ``app.css`` as the
    package ships them, and ``sw.js`` on its own.

The rounds of (a) and (b) alternate browser and simulator, each round with a fresh profile and a
fresh simulator key; the table shows medians. The session is seeded in the stopped daemon's store
with the entries of a real scripted turn, repeated to 5,000 lines (as the daemon benchmark's
full-sync case does). Run alone: ``python -m tests.bench web``.
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import sqlite3
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from bridge.protocol import InputCommand
from bridge.webclient import STATIC_DIR
from tests.bench.common import Row
from tests.bench.daemon_support import (
    EMBEDDED_RELAY,
    TimedPhone,
    await_turn,
    create_session,
    pair,
    testbed,
)
from tests.support.browser import Browser, missing_browser
from tests.support.daemon import DaemonProcess
from tests.support.web_pairing import base_url, open_pairing_link, pairing_link, tid

__all__ = ["notes", "run"]

ENTRIES = 5000
ROUNDS = 5
SYNC_TIMEOUT = 180.0
PAIR_TIMEOUT = 60.0
FIRST_LOAD = ("index.html", "app.js", "app.css")


@dataclass
class WebNumbers:
    browser_pair_ms: list[float] = field(default_factory=list)
    browser_screen_ms: list[float] = field(default_factory=list)
    """From opening the link to the pair screen's button (page load, the app's start)."""
    phone_pair_ms: list[float] = field(default_factory=list)
    browser_open_s: list[float] = field(default_factory=list)
    phone_sync_s: list[float] = field(default_factory=list)
    first_load_gz: int = 0
    first_load_raw: int = 0
    sw_gz: int = 0
    chromium: str | None = None


_LAST: list[WebNumbers] = []


def _gz(data: bytes) -> int:
    return len(gzip.compress(data, compresslevel=9, mtime=0))


def sizes(static: Path = STATIC_DIR) -> tuple[int, int, int]:
    """(first load gzipped, first load raw, sw.js gzipped) of the shipped app, in bytes."""
    missing = [name for name in (*FIRST_LOAD, "sw.js") if not (static / name).is_file()]
    if missing:
        raise RuntimeError(f"the shipped app lacks {missing} in {static} (cd web && npm run build)")
    first = [(static / name).read_bytes() for name in FIRST_LOAD]
    return (
        sum(_gz(data) for data in first),
        sum(map(len, first)),
        _gz((static / "sw.js").read_bytes()),
    )


def _fill(home: Path, session: str, templates: list[str], entries: int) -> None:
    """Give `session` the lines 1..`entries` in the stopped daemon's store."""
    rows = [(session, seq, templates[(seq - 1) % len(templates)]) for seq in range(1, entries + 1)]
    with contextlib.closing(sqlite3.connect(home / "bridge.db")) as conn, conn:
        conn.execute("DELETE FROM transcripts WHERE session_id = ?", (session,))
        conn.executemany("INSERT INTO transcripts (session_id, seq, entry) VALUES (?, ?, ?)", rows)


async def _seed(daemon: DaemonProcess, relay_url: str) -> str:
    """A session of :data:`ENTRIES` lines (a real turn's entries, repeated); its id."""
    phone = await pair(daemon, relay_url, "Seeding phone")
    try:
        session = await create_session(phone)
        mark = phone.mark()
        await phone.send(InputCommand(sessionId=session, text="lines 40"))
        await await_turn(phone, mark)
    finally:
        await phone.close()
    templates = list((await asyncio.to_thread(daemon.transcript, session)).values())
    if not templates:
        raise RuntimeError("the seeding turn left no entries")
    await daemon.stop()
    await asyncio.to_thread(_fill, daemon.home, session, templates, ENTRIES)
    await daemon.start()
    return session


async def _browser_round(
    daemon: DaemonProcess, session: str, profile: Path, numbers: WebNumbers
) -> None:
    async with Browser(profile) as browser:
        numbers.chromium = browser.version
        link, bridge = await pairing_link(daemon)
        start = time.perf_counter()
        await browser.goto(link)
        await browser.wait_for(tid("pair-submit"), timeout=PAIR_TIMEOUT)
        numbers.browser_screen_ms.append((time.perf_counter() - start) * 1000)
        await open_pairing_link(
            browser, link, bridge, "Bench browser", timeout=PAIR_TIMEOUT, navigate=False
        )
        numbers.browser_pair_ms.append((time.perf_counter() - start) * 1000)
        route = f"{base_url(daemon)}#/b/{bridge}/s/{session}"
        start = time.perf_counter()
        await browser.goto(route)
        await browser.wait_for_count(tid("entry"), ENTRIES, timeout=SYNC_TIMEOUT)
        numbers.browser_open_s.append(time.perf_counter() - start)
        seqs = [int(s) for s in await browser.attrs(tid("entry"), "data-seq") if s is not None]
        if seqs != list(range(1, ENTRIES + 1)):
            raise RuntimeError(f"the page shows {len(seqs)} rows, not seqs 1..{ENTRIES} in order")


async def _phone_round(
    daemon: DaemonProcess, relay_url: str, session: str, numbers: WebNumbers
) -> None:
    opened = await daemon.call("pair.open", duration=600)
    phone = TimedPhone(relays=[relay_url], label="Bench phone")
    try:
        start = time.perf_counter()
        ack = await phone.pair(opened["url"], timeout=PAIR_TIMEOUT)
        if not ack.message.ok:
            raise RuntimeError(f"pairing refused: {ack.message.reason}")
        await phone.wait_for("sessions", timeout=PAIR_TIMEOUT)
        numbers.phone_pair_ms.append((time.perf_counter() - start) * 1000)
        start = time.perf_counter()
        await phone.sync(session, wait=False)
        result = await phone.wait_sync(session, timeout=SYNC_TIMEOUT)
        numbers.phone_sync_s.append(time.perf_counter() - start)
        held = len(phone.transcript(session))
        if not result.complete or held != ENTRIES:
            raise RuntimeError(f"the simulator's sync ended with {held} of {ENTRIES} entries")
    finally:
        await phone.close()


async def measure(workdir: Path, rounds: int = ROUNDS) -> WebNumbers:
    reason = missing_browser()
    if reason is not None:
        raise RuntimeError(f"no browser here: {reason}")
    numbers = WebNumbers()
    numbers.first_load_gz, numbers.first_load_raw, numbers.sw_gz = sizes()
    async with contextlib.AsyncExitStack() as stack:
        bed = await testbed(stack, workdir / "bed", EMBEDDED_RELAY)
        await bed.daemon.start()
        session = await _seed(bed.daemon, bed.relay_url)
        for index in range(rounds):
            print(f"  web round {index + 1}/{rounds}", file=sys.stderr, flush=True)
            await _browser_round(bed.daemon, session, workdir / f"profile-{index}", numbers)
            await _phone_round(bed.daemon, bed.relay_url, session, numbers)
    return numbers


def run() -> list[Row]:
    with tempfile.TemporaryDirectory(prefix="cdb-bench-web-") as tmp:
        numbers = asyncio.run(measure(Path(tmp)))
    _LAST[:] = [numbers]
    simulator = "Python phone simulator"
    return [
        Row(
            "web (Chromium)",
            "pairing link opened → paired, p50",
            statistics.median(numbers.browser_pair_ms),
            statistics.median(numbers.phone_pair_ms),
            simulator,
            unit="ms",
        ),
        Row(
            "web (Chromium)",
            "pairing link opened → pair screen shown (cold page load), p50",
            statistics.median(numbers.browser_screen_ms),
            None,
            None,
            unit="ms",
        ),
        Row(
            "web (Chromium)",
            f"{ENTRIES:,}-entry session opened → every entry shown, p50",
            statistics.median(numbers.browser_open_s),
            statistics.median(numbers.phone_sync_s),
            f"{simulator} (full sync)",
            unit="s",
        ),
        Row(
            "web (Chromium)",
            "first load: index.html + app.js + app.css, gzipped",
            numbers.first_load_gz,
            None,
            None,
            unit="bytes",
        ),
        Row(
            "web (Chromium)",
            "service worker sw.js, gzipped",
            numbers.sw_gz,
            None,
            None,
            unit="bytes",
        ),
    ]


def notes() -> list[str]:
    if not _LAST:
        return []
    numbers = _LAST[0]
    rounds = len(numbers.browser_pair_ms)
    return [
        f"web (Chromium): Debian's Chromium {numbers.chromium or '?'} headless at 375×812, driven "
        "by playwright-core (tests/support/browser_driver.mjs) against the daemon's embedded "
        f"relay, which serves the app on the same port; {rounds} rounds, each with a fresh "
        "browser profile and a fresh simulator key, browser and simulator alternating. Pairing "
        "counts from opening the link (the simulator: sending pair-request) to the bridge shown "
        "online (the simulator: pair-ack and the first heartbeat), with the pair screen's one "
        "tap (the label filled by the driver) inside it. The session case counts from "
        f"loading the session's route to {ENTRIES:,} entry rows in the DOM (the simulator: "
        "sync-request to the sync complete); both are checked for seqs 1..5,000 each once. "
        f"First load is gzip -9 of the shipped files ({numbers.first_load_raw:,} bytes before "
        "compression); the service worker loads after the page.",
    ]
