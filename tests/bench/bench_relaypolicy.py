"""Relay write-policy throughput at a registry of 10,000 pubkeys, against the issue's aims.

Cases (decisions per second, a realistic mix of kinds and authors — registered writers, commands
with expiries, gift wraps, group messages, strangers and blocked kinds):

- ``decide``: the pure decision function on parsed requests (the embedded relay's path, with a
  ``MemoryRegistry``); aim ≥ 20,000/s;
- ``answer_line``: one strfry request line in, one answer line out, in-process (JSON parsing and
  serialisation included); aim ≥ 20,000/s;
- ``plugin pipes``: the real ``codedeck-relaypolicy plugin`` process, spawned with the command
  line of deploy/relay/strfry.conf and a 10,000-pubkey SQLite registry, driven the way strfry
  drives it — one request written, its answer read, then the next (the registry freshness check
  runs before every decision); aim ≥ 5,000/s.

The "baseline" column holds the aim, so ours / baseline ≥ 1 means the aim is met.

Run alone: ``python -m tests.bench relaypolicy``.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson

from relaypolicy import MemoryRegistry, RelayPolicy, parse_request
from store.registry import RegistryStore
from tests.bench.common import Row, measure_many
from tests.support.strfry_plugin_policy import REPO_ROOT, plugin_command

__all__ = ["notes", "run"]

REGISTRY_SIZE = 10_000
AIM_IN_PROCESS = 20_000.0
AIM_PIPES = 5_000.0
NOW = 1_760_000_000
MIN_TIME = 0.2
ROUNDS = 5

_notes: list[str] = []


def _key(n: int) -> str:
    return f"{n:064x}"


def _pubkeys() -> list[str]:
    return [_key(0x10000 + i) for i in range(REGISTRY_SIZE)]


def _requests(pubkeys: list[str], count: int = 4096) -> list[dict[str, Any]]:
    """A mix of what a CodeDeck relay sees; receivedAt advances so buckets refill realistically."""
    requests = []
    for i in range(count):
        author = pubkeys[(i * 7919) % len(pubkeys)]
        other = pubkeys[(i * 104729) % len(pubkeys)]
        received = NOW + i // 50
        shape = i % 10
        if shape in (0, 1, 2):
            kind, tags = 24515, [["p", other], ["s", "session"], ["seq", str(i)]]
        elif shape in (3, 4):
            kind, tags = 4515, [["p", other], ["expiration", str(received + 3600)]]
        elif shape == 5:
            kind, tags = 4516, [["p", other], ["expiration", str(received + 3600)]]
        elif shape == 6:
            kind, tags = 1059, [["p", other]]
            author = _key(0xF0000000 + i)  # one-off wrap key
        elif shape == 7:
            kind, tags = 445, [["h", "group"]]
            author = _key(0xE0000000 + i)
        elif shape == 8:
            kind, tags = 30515, [["d", "machine"], ["p", other]]
            author = _key(0xD0000000 + i)  # a stranger: restricted
        else:
            kind, tags = 1, []
        requests.append(
            {
                "type": "new",
                "event": {
                    "id": _key(0xA0000000 + i),
                    "pubkey": author,
                    "created_at": received,
                    "kind": kind,
                    "tags": tags,
                    "content": "x" * 200,
                    "sig": "0" * 128,
                },
                "receivedAt": received,
                "sourceType": "IP4",
                "sourceInfo": f"198.51.100.{i % 200}",
            }
        )
    return requests


def _cycle(items: list[Any]) -> Iterator[Any]:
    while True:
        yield from items


def _in_process_cases() -> dict[str, Callable[[], object]]:
    pubkeys = _pubkeys()
    requests = _requests(pubkeys)
    registry = MemoryRegistry(pubkeys)
    parsed = _cycle([parse_request(r) for r in requests])
    lines = _cycle([orjson.dumps(r) + b"\n" for r in requests])
    decide_policy = RelayPolicy(registry)
    line_policy = RelayPolicy(registry)

    def decide() -> object:
        return decide_policy.decide(next(parsed))

    def answer_line() -> object:
        return line_policy.answer_line(next(lines))

    return {"decide": decide, "answer_line": answer_line}


class _PluginDriver:
    """Talks to the plugin process like strfry: write one request, read its answer."""

    def __init__(self, registry: Path) -> None:
        self.process = subprocess.Popen(
            ["/bin/sh", "-c", plugin_command(registry)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
            bufsize=0,
        )
        assert self.process.stdin is not None and self.process.stdout is not None
        self._stdin = self.process.stdin
        self._stdout = self.process.stdout
        self._lines = _cycle([orjson.dumps(r) + b"\n" for r in _requests(_pubkeys())])
        self.answered = 0

    def __call__(self) -> object:
        self._stdin.write(next(self._lines))
        answer = self._stdout.readline()
        if not answer:
            raise RuntimeError("the plugin exited")
        self.answered += 1
        return answer

    def close(self) -> None:
        self._stdin.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def run() -> list[Row]:
    _notes.clear()
    results = measure_many(_in_process_cases(), min_time=MIN_TIME, rounds=ROUNDS)
    rows = [
        Row("relaypolicy", f"{name} (10k registry, mixed)", ops, AIM_IN_PROCESS, "aim (issue)")
        for name, ops in results.items()
    ]
    with tempfile.TemporaryDirectory() as tmp:
        registry = Path(tmp) / "registry.db"
        with RegistryStore.open(registry) as store:
            for pubkey in _pubkeys():
                store.register(pubkey, now=NOW)
        driver = _PluginDriver(registry)
        try:
            for _ in range(200):  # start-up, first registry load
                driver()
            started = time.perf_counter()
            pipes = measure_many({"pipes": driver}, min_time=MIN_TIME, rounds=ROUNDS)["pipes"]
            _notes.append(
                f"relaypolicy: {driver.answered:,} plugin round trips in "
                f"{time.perf_counter() - started:.1f} s through the pipes, one at a time."
            )
        finally:
            driver.close()
    rows.append(
        Row("relaypolicy", "plugin pipes (10k registry, mixed)", pipes, AIM_PIPES, "aim (issue)")
    )
    return rows


def notes() -> list[str]:
    return [
        "relaypolicy: baseline = the issue's aim (in-process ≥ 20,000/s, pipes ≥ 5,000/s); "
        "ratio ≥ 1 means the aim is met.",
        *_notes,
    ]


if __name__ == "__main__":
    for row in run():
        print(f"{row.name}: {row.ours:,.0f}/s (aim {row.baseline:,.0f}/s)")
    for line in notes():
        print(line)
