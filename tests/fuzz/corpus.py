"""The seed corpus: interesting inputs kept as JSON files, replayed as explicit test cases.

``corpus/ingest/*.json`` — events for the engine::

    {"description": "...", "expect": "dropped" | "accepted",
     "events": [{"plaintext": "..." | ["piece", ["a", 60000], ...],
                 "via": "nip44" | "wrong-key" | "raw", "author": "phone" | "stranger",
                 "to": "bridge" | "stranger" | "none", "kind": 4515, "age": 0}, ...]}

``$SESSION`` in a plaintext stands for the id of the engine's live session; a ``[text, n]`` piece
is ``text`` repeated ``n`` times (oversized payloads without megabytes of JSON in the repo).

``corpus/frames/*.json`` — relay frames for the parser::

    {"description": "...", "expect": "error" | "ok", "frame": "..." | "frame_base64": "..."}
    (``frame`` may also be a list of pieces, as above)

Add a file here when the fuzzer finds something: it is then checked on every run.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.fuzz.engine_harness import NOW, STRANGER, Fed, seal

__all__ = ["CORPUS", "CorpusCase", "FrameCase", "frame_cases", "ingest_cases"]

CORPUS = Path(__file__).parent / "corpus"


def _pieces(value: str | Sequence[Any]) -> str:
    if isinstance(value, str):
        return value
    out = []
    for piece in value:
        out.append(piece if isinstance(piece, str) else str(piece[0]) * int(piece[1]))
    return "".join(out)


@dataclass(frozen=True, slots=True)
class CorpusCase:
    name: str
    description: str
    expect: str
    events: tuple[dict[str, Any], ...]

    def build(self, session: str) -> list[Fed]:
        """The events of the case, for an engine whose live session is `session`."""
        fed = []
        for spec in self.events:
            plaintext = _pieces(spec["plaintext"]).replace("$SESSION", session)
            via = spec.get("via", "nip44")
            author = STRANGER if spec.get("author") == "stranger" else None
            to = spec.get("to", "bridge")
            kind = int(spec.get("kind", 4515))
            created_at = int(NOW) - int(spec.get("age", 0))
            tags: list[list[str]] | None = None
            if to == "stranger":
                tags = [["p", STRANGER.public_hex], ["expiration", str(created_at + 3600)]]
            elif to == "none":
                tags = [["expiration", str(created_at + 3600)]]
            options: dict[str, Any] = {"created_at": created_at, "kind": kind, "tags": tags}
            if author is not None:
                options["author"] = author
            if via == "wrong-key":
                options["key_of"] = STRANGER
            event = seal(plaintext, raw_content=via == "raw", **options)
            refused = via != "nip44" or author is not None or to != "bridge" or kind != 4515
            fed.append(Fed(event, None if via != "nip44" else plaintext, refused=refused))
        return fed


@dataclass(frozen=True, slots=True)
class FrameCase:
    name: str
    description: str
    expect: str
    frame: str | bytes


def _load(directory: str) -> list[tuple[str, dict[str, Any]]]:
    return [
        (path.stem, json.loads(path.read_text(encoding="utf-8")))
        for path in sorted((CORPUS / directory).glob("*.json"))
    ]


def ingest_cases() -> list[CorpusCase]:
    return [
        CorpusCase(name, data["description"], data["expect"], tuple(data["events"]))
        for name, data in _load("ingest")
    ]


def frame_cases() -> list[FrameCase]:
    cases = []
    for name, data in _load("frames"):
        frame: str | bytes
        if "frame_base64" in data:
            frame = base64.b64decode(data["frame_base64"])
        else:
            frame = _pieces(data["frame"])
        cases.append(FrameCase(name, data["description"], data["expect"], frame))
    return cases
