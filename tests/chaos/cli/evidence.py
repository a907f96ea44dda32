"""What happened, read from outside the bridge once the run is over.

* the **ledger files**: how many times each input's Bash call really ran;
* **Claude Code's own session files** (``<CLAUDE_CONFIG_DIR>/projects/**/*.jsonl``): every Bash
  call of ours and its result, refusals included, as the CLI recorded them. Records are taken
  once by their ``uuid`` (a resumed conversation may copy history into a new file) and results
  once by ``tool_use_id``;
* the **store** (``transcripts``) and the **phone** after a final sync;
* the **daemon's log**, the session hosts' logs, and the processes still running after the final
  stop.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bridge.protocol import OutputEntry
from bridge.protocol.codec import decode_as
from tests.chaos.cli.model import input_ids_in
from tests.support.phone_sync import SyncResult

__all__ = ["CliCall", "CliRecord", "Snapshot", "read_cli_record", "store_entries"]


@dataclass(frozen=True, slots=True)
class CliCall:
    """One Bash call of ours in Claude Code's session files, with its result (if recorded)."""

    tool_use_id: str
    input_id: str
    result: str | None
    """The result text (None: no result was recorded)."""
    is_error: bool
    decision: str
    """Claude Code's ``permissionDecision.decision``/``reasonCode`` when it recorded one."""


@dataclass
class CliRecord:
    """The Bash calls of ours that Claude Code recorded, and the prompts it was given."""

    calls: dict[str, CliCall] = field(default_factory=dict)
    """tool_use_id → the call."""
    prompts: Counter[str] = field(default_factory=Counter)
    """input id → user messages (records, by uuid) that carried its prompt."""
    modes: dict[str, list[str]] = field(default_factory=dict)
    """input id → the ``permissionMode`` Claude Code recorded with each of those messages."""
    files: int = 0
    unreadable: list[str] = field(default_factory=list)

    def calls_of(self, input_id: str) -> list[CliCall]:
        return [c for c in self.calls.values() if c.input_id == input_id]


def _records(paths: list[Path], record: CliRecord) -> Iterator[Mapping[str, Any]]:
    seen: set[str] = set()
    for path in paths:
        try:
            lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError as exc:
            record.unreadable.append(f"{path.name}: {exc}")
            continue
        for line in lines:
            try:
                item = json.loads(line)
            except ValueError:
                continue  # a torn last line of a killed CLI
            if not isinstance(item, dict):
                continue
            uid = item.get("uuid")
            if isinstance(uid, str):
                if uid in seen:
                    continue
                seen.add(uid)
            yield item


def _content(item: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    message = item.get("message")
    content = message.get("content") if isinstance(message, Mapping) else None
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content if isinstance(b, Mapping)] if isinstance(content, list) else []


def _text(block: Mapping[str, Any]) -> str:
    content = block.get("content")
    if isinstance(content, list):
        return " ".join(str(i.get("text", "")) for i in content if isinstance(i, Mapping))
    return str(content or "")


def read_cli_record(config_dir: Path) -> CliRecord:
    """The Bash calls of ours (and prompts) in every session file under `config_dir`."""
    record = CliRecord()
    paths = sorted((config_dir / "projects").rglob("*.jsonl"))
    record.files = len(paths)
    uses: dict[str, str] = {}
    results: dict[str, tuple[str, bool, str]] = {}
    for item in _records(paths, record):
        kind = item.get("type")
        if kind == "assistant":
            for block in _content(item):
                tool_input = block.get("input")
                if block.get("type") == "tool_use" and isinstance(tool_input, Mapping):
                    ids = input_ids_in(str(tool_input.get("command", "")))
                    if ids:
                        uses[str(block.get("id"))] = ids[0]
        elif kind == "user":
            mode = item.get("permissionMode")
            decision = item.get("permissionDecision")
            said = ""
            if isinstance(decision, Mapping):
                said = f"{decision.get('decision', '')}/{decision.get('reasonCode', '')}"
            for block in _content(item):
                if block.get("type") == "tool_result":
                    tool_use_id = str(block.get("tool_use_id"))
                    results[tool_use_id] = (_text(block), block.get("is_error") is True, said)
                elif block.get("type") == "text":
                    for input_id in dict.fromkeys(_prompt_ids(str(block.get("text", "")))):
                        record.prompts[input_id] += 1
                        if isinstance(mode, str):
                            record.modes.setdefault(input_id, []).append(mode)
    for tool_use_id, input_id in uses.items():
        text, is_error, said = results.get(tool_use_id, (None, False, ""))
        record.calls[tool_use_id] = CliCall(tool_use_id, input_id, text, is_error, said)
    return record


def _prompt_ids(text: str) -> list[str]:
    return [i for i in input_ids_in(text) if f"[[cc: {i}" in text]


def store_entries(raw: Mapping[int, str]) -> dict[int, OutputEntry]:
    """The store's transcript rows (seq → entry JSON) as entries."""
    return {seq: decode_as(OutputEntry, text) for seq, text in raw.items()}


@dataclass
class Snapshot:
    """Everything read at the end of a run (see the module docstring)."""

    marks: Counter[str]
    store: dict[str, dict[int, OutputEntry]]
    phone: dict[str, dict[int, OutputEntry]]
    syncs: dict[str, SyncResult | None]
    cli: CliRecord
    log_records: list[dict[str, Any]]
    host_logs: dict[str, str] = field(default_factory=dict)
    """Session id → the host's log (copied before the final stop removes it)."""
    sync_errors: list[str] = field(default_factory=list)
    stop_status: int | None = None
    leftovers: list[str] = field(default_factory=list)
    """Processes of the run still alive after the final stop (then killed)."""
    live_hosts_before_stop: int = 0
