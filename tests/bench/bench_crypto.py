"""Crypto throughput: ours (coincurve + cryptography + orjson) against nostr-tools under Node.

nostr-tools is what the CodeDeck phone app uses, so it is the natural yardstick. Both sides get
the same keys, messages, payloads and events (written to one JSON file the Node script reads),
do the same operations, and are measured the same way (tests/bench/common.py). Cases:

- sign: build + id + BIP-340-sign a small event (``sign_event`` / ``finalizeEvent``);
- verify: recompute the id and BIP-340-verify (``verify_event`` / ``verifyEvent``);
- NIP-44 encrypt/decrypt of 1 KB and 60 KB with a cached conversation key;
- outbound pipeline: JSON-encode a typical CodeDeck message → NIP-44-encrypt (cached key) →
  id → sign → serialize the ``["EVENT", event]`` frame;
- inbound pipeline: parse the event JSON → verify (id + signature) → NIP-44-decrypt →
  JSON-decode the message.

nostr-tools is installed from the npm registry into tests/bench/.node/ on first use (gitignored).
Without node/npm the rows keep our numbers and have no baseline.
"""

from __future__ import annotations

import functools
import json
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from bridge.nostr import nip44
from bridge.nostr.event import (
    check_event,
    checked_signatures,
    parse_event,
    sign_event,
    verify_event,
)
from bridge.nostr.keys import Keypair
from tests.bench.common import Row, measure_many

__all__ = ["notes", "run"]

BENCH_DIR = Path(__file__).resolve().parent
NODE_PREFIX = BENCH_DIR / ".node"
NODE_SCRIPT = BENCH_DIR / "crypto_bench.cjs"
NOSTR_TOOLS_SPEC = "nostr-tools@2"
MIN_TIME = 0.2
ROUNDS = 5
CREATED_AT = 1_760_000_000
KIND_COMMAND = 4515  # phone → bridge
KIND_LIVE = 24515  # bridge → phone, ephemeral

_notes: list[str] = []


# --- inputs -------------------------------------------------------------------------------------

_LINES = [
    "def handle(self, msg: Inbound, now: float) -> list[Effect]:",
    "    # Persist before acting: a crash never runs a command twice.",
    '    return [PublishEvent(kind=24515, tags=[("p", phone)], body=body)]',
    "Ran 214 tests in 3.2 s — all passed ✓",
    "Résumé: la session reprend après le redémarrage → OK",
    "diff --git a/bridge/engine/ingest.py b/bridge/engine/ingest.py",
    "+        if event.created_at < now - REPLAY_WINDOW: return [Drop('stale')]",
    "Looking at the failing test 🧪, the cursor is advanced before the commit.",
]


def typical_message(size: int) -> dict[str, Any]:
    """A CodeDeck-like ``output`` message whose compact JSON is about ``size`` bytes."""
    entries: list[dict[str, Any]] = []
    message: dict[str, Any] = {
        "v": 10,
        "type": "output",
        "sessionId": "7c9e6679-7425-40de-944b-e07fc1f90ae7",
        "entries": entries,
    }
    seq = 1000
    while len(orjson.dumps(message)) < size:
        text = "\n".join(_LINES[(seq + i) % len(_LINES)] for i in range(4))
        kind = ("text", "tool_use", "tool_result", "thinking")[seq % 4]
        entries.append({"seq": seq, "kind": kind, "ts": 1_760_000_000_000 + seq, "text": text})
        seq += 1
    excess = len(orjson.dumps(message)) - size
    last = entries[-1]
    last["text"] = (
        last["text"]
        .encode()[: max(1, len(last["text"].encode()) - excess)]
        .decode("utf-8", "ignore")
    )
    return message


def _plaintext(size: int) -> str:
    text = "".join(_LINES) * (size // 200 + 1)
    return text.encode()[:size].decode("utf-8", "ignore")


class Inputs:
    """Everything both sides work on, built once, deterministic except for fresh nonces/aux."""

    def __init__(self) -> None:
        self.bridge = Keypair.from_secret("a1" * 32)
        self.phone = Keypair.from_secret("b2" * 32)
        self.cache = nip44.ConversationKeyCache(self.bridge.secret)
        phone_key = nip44.ConversationKeyCache(self.phone.secret).get(self.bridge.public_hex)
        self.sign_content = "x" * 120
        self.sign_tags = [["p", self.phone.public_hex]]
        self.outbound_tags = [
            ["p", self.phone.public_hex],
            ["expiration", str(CREATED_AT + 3600)],
        ]
        self.verify_event = sign_event(
            self.phone, 1, self.sign_content, self.sign_tags, created_at=CREATED_AT
        )
        self.plaintexts = {"1KB": _plaintext(1024), "60KB": _plaintext(60 * 1024)}
        key = self.cache.get(self.phone.public_hex)
        self.payloads = {name: nip44.encrypt(pt, key) for name, pt in self.plaintexts.items()}
        self.messages = {"1KB": typical_message(1024), "40KB": typical_message(40 * 1024)}
        # What the phone sends: a kind-4515 command, encrypted to the bridge and signed.
        self.inbound_events = {
            name: sign_event(
                self.phone,
                KIND_COMMAND,
                nip44.encrypt(orjson.dumps(msg).decode(), phone_key),
                [["p", self.bridge.public_hex]],
                created_at=CREATED_AT,
            ).to_json()
            for name, msg in self.messages.items()
        }

    def for_node(self) -> dict[str, Any]:
        return {
            "bridge_secret": self.bridge.secret_hex,
            "phone_pubkey": self.phone.public_hex,
            "sign": {
                "kind": 1,
                "created_at": CREATED_AT,
                "tags": self.sign_tags,
                "content": self.sign_content,
            },
            "verify_event": self.verify_event.to_json(),
            "plaintexts": self.plaintexts,
            "payloads": self.payloads,
            "messages": self.messages,
            "outbound": {"kind": KIND_LIVE, "created_at": CREATED_AT, "tags": self.outbound_tags},
            "inbound_events": self.inbound_events,
            "min_time": MIN_TIME,
            "rounds": ROUNDS,
        }


# --- our cases ----------------------------------------------------------------------------------


def our_cases(inp: Inputs) -> dict[str, Callable[[], object]]:
    bridge, phone_hex, cache = inp.bridge, inp.phone.public_hex, inp.cache
    parsed_verify_event = parse_event(orjson.loads(inp.verify_event.to_json()))

    def sign() -> object:
        return sign_event(bridge, 1, inp.sign_content, inp.sign_tags, created_at=CREATED_AT)

    # The process remembers pairs it checked (bridge.nostr.event.checked_signatures); each
    # verifying case forgets them first, so that every round times a first check.
    def verify() -> None:
        checked_signatures.clear()
        if not verify_event(parsed_verify_event):
            raise AssertionError("verify failed")

    def outbound(message: dict[str, Any]) -> Callable[[], bytes]:
        def run() -> bytes:
            plaintext = orjson.dumps(message).decode()
            content = nip44.encrypt(plaintext, cache.get(phone_hex))
            event = sign_event(bridge, KIND_LIVE, content, inp.outbound_tags, created_at=CREATED_AT)
            return orjson.dumps(["EVENT", event.to_dict()])

        return run

    def inbound(event_json: str) -> Callable[[], object]:
        def run() -> object:
            checked_signatures.clear()
            event = check_event(parse_event(orjson.loads(event_json)))
            return orjson.loads(nip44.decrypt(event.content, cache.get(event.pubkey)))

        return run

    cases: dict[str, Callable[[], object]] = {"sign": sign, "verify": verify}
    key = cache.get(phone_hex)
    for size, plaintext in inp.plaintexts.items():
        cases[f"nip44_encrypt_{size}"] = functools.partial(nip44.encrypt, plaintext, key)
        cases[f"nip44_decrypt_{size}"] = functools.partial(nip44.decrypt, inp.payloads[size], key)
    for size, message in inp.messages.items():
        cases[f"outbound_{size}"] = outbound(message)
        cases[f"inbound_{size}"] = inbound(inp.inbound_events[size])
    return cases


def _self_check(inp: Inputs, cases: dict[str, Callable[[], object]]) -> None:
    """Fail loudly if a case does not do what its row claims (a benchmark of a bug is useless)."""
    peer_key = nip44.conversation_key(inp.phone.secret, inp.bridge.public_bytes)
    for size, message in inp.messages.items():
        frame = orjson.loads(cases[f"outbound_{size}"]())  # type: ignore[arg-type]
        event = check_event(parse_event(frame[1]))
        if orjson.loads(nip44.decrypt(event.content, peer_key)) != message:
            raise AssertionError(f"outbound {size} does not round-trip")
        if cases[f"inbound_{size}"]() != message:
            raise AssertionError(f"inbound {size} decodes wrongly")
        if abs(len(orjson.dumps(message)) - int(size.removesuffix("KB")) * 1024) >= 64:
            raise AssertionError(f"message {size} has the wrong size")


# --- nostr-tools baseline -----------------------------------------------------------------------


def _ensure_nostr_tools() -> str | None:
    """Install nostr-tools once; returns why the baseline is unavailable, or None."""
    if shutil.which("node") is None:
        return "node is not installed"
    if (NODE_PREFIX / "node_modules" / "nostr-tools" / "package.json").is_file():
        return None
    npm = shutil.which("npm")
    if npm is None:
        return "npm is not installed"
    proc = subprocess.run(
        [npm, "install", "--prefix", str(NODE_PREFIX), NOSTR_TOOLS_SPEC, "--no-audit", "--no-fund"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if proc.returncode != 0:
        return f"npm install {NOSTR_TOOLS_SPEC} failed: {proc.stderr.strip()[-300:]}"
    return None


def node_baseline(inp: Inputs) -> tuple[dict[str, float] | None, str]:
    """Run the Node script; returns (ops per case, description) or (None, reason)."""
    problem = _ensure_nostr_tools()
    if problem:
        return None, problem
    with tempfile.TemporaryDirectory(prefix="bench-crypto-") as tmp:
        path = Path(tmp) / "inputs.json"
        path.write_text(json.dumps(inp.for_node(), ensure_ascii=False), encoding="utf-8")
        proc = subprocess.run(
            ["node", str(NODE_SCRIPT), str(NODE_PREFIX), str(path)],
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
    if proc.returncode != 0:
        return None, f"node script failed: {proc.stderr.strip()[-500:]}"
    result = json.loads(proc.stdout)
    # The Node side's outbound events must be what ours are: valid, and decrypting to the message.
    peer_key = nip44.conversation_key(inp.phone.secret, inp.bridge.public_bytes)
    for size, message in inp.messages.items():
        event = check_event(parse_event(result["samples"][f"outbound_{size}"]))
        if orjson.loads(nip44.decrypt(event.content, peer_key)) != message:
            return None, f"nostr-tools outbound {size} did not round-trip"
    versions = result["versions"]
    return result["ops"], f"nostr-tools {versions['nostr_tools']} on Node {versions['node']}"


# --- rows ---------------------------------------------------------------------------------------

ROWS = [
    ("crypto", "sign", "sign event (id + BIP-340, self-checked)"),
    ("crypto", "verify", "verify event (id + BIP-340)"),
    ("crypto", "nip44_encrypt_1KB", "NIP-44 encrypt 1 KB"),
    ("crypto", "nip44_decrypt_1KB", "NIP-44 decrypt 1 KB"),
    ("crypto", "nip44_encrypt_60KB", "NIP-44 encrypt 60 KB"),
    ("crypto", "nip44_decrypt_60KB", "NIP-44 decrypt 60 KB"),
    ("pipeline", "outbound_1KB", "outbound 1 KB: JSON → NIP-44 → id → sign → frame"),
    ("pipeline", "outbound_40KB", "outbound 40 KB: JSON → NIP-44 → id → sign → frame"),
    ("pipeline", "inbound_1KB", "inbound 1 KB: parse → verify → NIP-44 → JSON"),
    ("pipeline", "inbound_40KB", "inbound 40 KB: parse → verify → NIP-44 → JSON"),
]


def run() -> list[Row]:
    _notes.clear()
    inp = Inputs()
    cases = our_cases(inp)
    _self_check(inp, cases)
    ours = measure_many(cases, min_time=MIN_TIME, rounds=ROUNDS)
    baseline, description = node_baseline(inp)
    if baseline is None:
        _notes.append(f"crypto: no nostr-tools baseline ({description}).")
        name = None
    else:
        name = "nostr-tools"
        _notes.append(
            f"crypto: baseline is {description} (pure JS: @noble/curves, @noble/ciphers), "
            "running the same cases with the same inputs; see tests/bench/crypto_bench.cjs. "
            "Ours: coincurve (libsecp256k1), cryptography's ChaCha20, stdlib HMAC, orjson. "
            "Both sides sign with fresh aux randomness and verify each signature they produce."
        )
    return [
        Row(group, label, ours[key], baseline.get(key) if baseline else None, name)
        for group, key, label in ROWS
    ]


def notes() -> list[str]:
    return list(_notes)
