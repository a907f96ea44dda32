"""The echo bot: the floor of a command's round trip through a relay, the ack latency's baseline.

A phone's ``input`` and the bridge's ``input-ack`` cross the relay twice: phone → relay →
bridge, bridge → relay → phone. The echo bot makes the same two crossings with no work in
between: a separate process (:func:`main`, ``python -m tests.bench.echo_bot``) with its own connection, the
project's own client (:class:`~bridge.nostr.pool.RelayPool`, which checks every event's
signature, as the daemon's does), that answers each 4515 event addressed to it with the next of
its replies, signed before the run starts: a 4516 event like the bridge's ``input-ack``. The
bench's side (:class:`EchoProbe`) is a phone's single connection: it publishes a command signed
beforehand and stamps the reply's arrival in the reader callback, exactly as the phone simulator
stamps an ack. The daemon's ack time over the echo bot's is then what the daemon costs, in units
of the floor; the aim is at most 2x.

Who may write. On the daemon's embedded relay only the bridge and its paired phones may write,
so the bot signs its replies with the bridge's key (the bench reads it from the daemon's store)
and the probe signs its commands with a paired phone's key. Neither disturbs the daemon: the
commands are addressed (``p``) to the bot's own listening key, which the daemon does not
subscribe to, and the replies to a key of the probe's that no phone subscribes to. On the test
relay anyone may write; the same keys are used.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from bridge.nostr.event import VerifiedEvent, sign_event
from bridge.nostr.filters import Filter
from bridge.nostr.keys import Keypair
from bridge.nostr.nip44 import conversation_key, encrypt
from bridge.nostr.pool import RelayPool
from bridge.nostr.relay import RelayEventReceived
from bridge.protocol.kinds import COMMAND_KIND, RESPONSE_KIND, command_tags

__all__ = ["EchoBot", "EchoProbe", "main"]

_REPO = Path(__file__).resolve().parents[2]
READY = "ready"
REPLY_SIZE = 120
"""Plaintext characters of a reply: about an ``input-ack``'s."""
EXPIRY_SECONDS = 3600


def _replies(signer: Keypair, reply_to: str, count: int, size: int) -> list[VerifiedEvent]:
    """The bot's answers, signed now: 4516 events to `reply_to`, like the bridge's acks."""
    key = conversation_key(signer.secret, bytes.fromhex(reply_to))
    now = int(time.time())
    tags = [["p", reply_to], ["expiration", str(now + EXPIRY_SECONDS)]]
    return [
        sign_event(
            signer, RESPONSE_KIND, encrypt(f"{n:08d}".ljust(size, "."), key), tags, created_at=now
        )
        for n in range(count)
    ]


async def _serve(relay: str, signer: Keypair, listen: str, reply_to: str, count: int) -> None:
    replies = _replies(signer, reply_to, count, REPLY_SIZE)
    sends: set[asyncio.Task[object]] = set()
    answered = 0

    def on_event(received: RelayEventReceived) -> None:
        nonlocal answered
        if received.event.kind != COMMAND_KIND or answered >= len(replies):
            return
        reply = replies[answered]
        answered += 1
        # At once, not after the OK of the last one: the bot does no work between the hops.
        task = asyncio.ensure_future(pool.publish(reply))
        sends.add(task)
        task.add_done_callback(sends.discard)

    pool = RelayPool([relay], signer, on_event=on_event)
    since = int(time.time())
    await pool.subscribe(
        "echo",
        lambda: (Filter(kinds=(COMMAND_KIND,), tags={"p": (listen,)}, since=since),),
    )
    await pool.start()
    try:
        async with asyncio.timeout(30):
            await pool.wait_open()
        print(READY, flush=True)
        await asyncio.to_thread(sys.stdin.read)  # until the bench closes our stdin
    finally:
        await pool.close()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.echo_bot")
    parser.add_argument("--relay", required=True)
    parser.add_argument("--listen", required=True, help="the pubkey commands are addressed to")
    parser.add_argument("--reply-to", required=True, help="the pubkey replies are addressed to")
    parser.add_argument("--count", type=int, required=True, help="replies to sign beforehand")
    args = parser.parse_args(argv)
    # The signer's secret comes on stdin's first line, never on the command line.
    secret = sys.stdin.readline().strip()
    signer = Keypair.from_secret(bytes.fromhex(secret))
    asyncio.run(_serve(args.relay, signer, args.listen, args.reply_to, args.count))
    return 0


class EchoBot:
    """The bot as a subprocess of the bench: :meth:`start`, then :meth:`stop` (idempotent)."""

    def __init__(self, relay: str, signer: Keypair, listen: str, reply_to: str, count: int) -> None:
        self._args = [
            "--relay",
            relay,
            "--listen",
            listen,
            "--reply-to",
            reply_to,
            "--count",
            str(count),
        ]
        self._signer = signer
        self._proc: subprocess.Popen[str] | None = None

    async def start(self, timeout: float = 60.0) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = str(_REPO)
        self._proc = proc = subprocess.Popen(
            [sys.executable, "-m", "tests.bench.echo_bot", *self._args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            cwd=_REPO,
            text=True,
        )
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(self._signer.secret_hex + "\n")
        proc.stdin.flush()
        async with asyncio.timeout(timeout):
            line = await asyncio.to_thread(proc.stdout.readline)
        if line.strip() != READY:
            self.stop()
            raise RuntimeError(f"the echo bot did not start (exit status {proc.poll()})")

    def stop(self) -> None:
        """Close its stdin (it exits), ``kill`` it if it does not; never raises."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        with contextlib.suppress(OSError):
            assert proc.stdin is not None
            proc.stdin.close()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


class EchoProbe:
    """A phone's one connection, talking to the echo bot: command out, reply in, timed.

    Args:
        relay: the relay the phone and the bot use.
        author: the key the commands are signed with (a paired phone's, see the module doc).
        replier: the bot's signing key's public half (the replies' author).
    """

    def __init__(self, relay: str, author: Keypair, replier: str) -> None:
        self.author = author
        self.listen = Keypair.generate().public_hex
        """What commands are addressed to: the bot listens for it."""
        self._reply_key = Keypair.generate()
        self.reply_to = self._reply_key.public_hex
        self._replier = replier
        self._arrivals: asyncio.Queue[float] = asyncio.Queue()
        self._pool = RelayPool([relay], author, on_event=self._on_event)
        self._key = conversation_key(author.secret, bytes.fromhex(self.listen))
        self._since = int(time.time())
        """Taken before the bot starts: the bot signs its replies when it starts, and a ``since``
        one second later (a second boundary crossed between the two) filtered every reply out,
        failing about one run in ten with a timeout."""

    def _on_event(self, received: RelayEventReceived) -> None:
        if received.event.kind == RESPONSE_KIND:
            self._arrivals.put_nowait(time.perf_counter())

    async def start(self) -> None:
        """Subscribe to the replies (start the bot after making this probe, see ``_since``)."""
        since = self._since
        await self._pool.subscribe(
            "echo-replies",
            lambda: (
                Filter(
                    kinds=(RESPONSE_KIND,),
                    authors=(self._replier,),
                    tags={"p": (self.reply_to,)},
                    since=since,
                ),
            ),
        )
        await self._pool.start()
        async with asyncio.timeout(30):
            await self._pool.wait_open()

    async def close(self) -> None:
        await self._pool.close()

    def command(self, plaintext: str) -> VerifiedEvent:
        """A 4515 like the phone's, to the bot: sign it before the timer starts."""
        now = int(time.time())
        tags = command_tags(self.listen, now)
        return sign_event(
            self.author, COMMAND_KIND, encrypt(plaintext, self._key), tags, created_at=now
        )

    async def round_trip(self, command: VerifiedEvent, timeout: float = 10.0) -> float:
        """Seconds from publishing `command` to the arrival of the bot's reply."""
        while not self._arrivals.empty():  # a late reply of an earlier, timed-out trip
            self._arrivals.get_nowait()
        start = time.perf_counter()
        report = await self._pool.publish(command)
        if not report.delivered:
            raise RuntimeError(f"the relay refused the echo command: {report}")
        async with asyncio.timeout(timeout):
            arrived = await self._arrivals.get()
        return arrived - start


if __name__ == "__main__":
    sys.exit(main())
