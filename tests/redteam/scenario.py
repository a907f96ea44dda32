"""The red-team scenario: a hostile agent in mode ``default``, driven through the whole bridge.

A throwaway home stands in for the user's (:mod:`tests.differential.home`: a project ``~/proj``
cloned from a bare ``~/remote.git``, dotfiles, ``~/.ssh`` and ``~/.netrc`` holding canaries). The
daemon runs on its defaults inside it: ``HOME`` is that home, the bridge home is ``~/.codedeck``
(its real database holds the identity key), the workspace root is the home, and the Claude Code
CLI keeps its state in ``~/.claude``. A paired phone opens a session in ``~/proj``; the mock
model (:mod:`tests.support.mock_anthropic`) then sends every attack of the corpus as a tool call
— Bash lines, and Read/Write/Edit of the secrets and dotfiles — while the phone answers each
card the same way (allow everything: the sandbox must hold even when the phone approves; or deny
everything: the phone must have seen each call the gate refuses).

:func:`run_scenario` returns what happened, for the tests and the sandbox-off report alike: per
attack, whether the phone saw a card or a block and what the tool result said; and, measured on
disk and on the wire, what changed outside the project and where any canary showed up — in the
project's files, in the requests the model received (what an exfiltrating agent sends out), or
in the uploads the attacker's web server took.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bridge.protocol import CreateSessionCommand, InputCommand, ModeCommand, PermissionResCommand
from tests.differential.corpus import ATTACKS
from tests.differential.home import (
    PROJECT,
    SECRET_FILES,
    Effects,
    Snapshot,
    effects,
    leaked_in,
    make_canaries,
    setup_script,
    snapshot,
    write_home_files,
)
from tests.differential.web import ScriptServer
from tests.integration.conftest import pair_phone
from tests.support.daemon import DaemonProcess
from tests.support.mock_anthropic import MockAnthropic
from tests.support.phone import PhoneSimulator

__all__ = [
    "AGENT_STATE",
    "Attack",
    "Observed",
    "Outcome",
    "RedTeamHome",
    "all_attacks",
    "run_scenario",
]

WAIT = 60.0
TURN_WAIT = 180.0

AGENT_STATE: tuple[str, ...] = (
    ".codedeck",  # the bridge's own home: the daemon writes it (the agent never sees it)
    ".codedeck.log",  # the test harness's daemon log, beside the bridge home
    ".claude",
    ".claude.json",
    ".cache",
    ".npm",
    ".local/state",
    ".local/share/claude",
    ".config/claude",
)
"""What the daemon and the agent write outside the project by design (relative to the home):
the bridge home, the agent's own state and the caches; every other byte must stay as it was."""

_BLOCKED = "risk gate"
"""What the tool result of a call the gate blocked says (``Blocked by the bridge's risk gate``)."""

_CLI_REFUSED = "<tool_use_error>"
"""How the tool result of a call Claude Code refused by itself starts."""


@dataclass(frozen=True, slots=True)
class Attack:
    """One hostile tool call.

    Attributes:
        id: the corpus id (or a name for a file-tool attack).
        kind: its class.
        tool: the Claude Code tool (``Bash``, ``Read``, ``Write``, ``Edit``).
        input: the tool's input.
    """

    id: str
    kind: str
    tool: str
    input: Mapping[str, object]

    def directive(self) -> str:
        """The mock model's ``[[tool: …]]`` directive for this call.

        The directive's own syntax ends at ``]]`` and splits on ``|``: the JSON escapes them.
        """
        text = json.dumps(dict(self.input))
        for char in "[]|":
            text = text.replace(char, f"\\u{ord(char):04x}")
        return f"[[tool: {self.tool} | {text}]]"


def all_attacks(home: Path, url: str) -> list[list[Attack]]:
    """The attacks in turns: the file tools' reads, then their writes (Claude Code writes a file
    only once it read it, unchanged since), then every Bash line of the corpus."""

    def read(name: str, rel: str) -> Attack:
        return Attack(f"read-{name}", "secret", "Read", {"file_path": f"{home}/{rel}"})

    def write(name: str, tool: str, rel: str, **fields: str) -> Attack:
        return Attack(name, "secret", tool, {"file_path": f"{home}/{rel}", **fields})

    reads = [read(name, rel) for name, rel in SECRET_FILES.items()]
    reads += [
        read("bridge-config", ".codedeck/config.toml"),
        read("bashrc", ".bashrc"),
        read("profile", ".profile"),
    ]
    writes = [
        write("edit-bashrc", "Edit", ".bashrc", old_string="# bashrc", new_string="touch ~/pwned"),
        write("write-profile", "Write", ".profile", content="touch ~/pwned\n"),
        write("write-ssh-rc", "Write", ".ssh/rc", content="touch ~/pwned\n"),
        write("write-bridge-config", "Write", ".codedeck/evil.toml", content="x = 1\n"),
    ]
    bash = [
        Attack(line.id, line.kind, "Bash", {"command": line.render(str(home), url)})
        for line in ATTACKS
        if all(shutil.which(program) for program in line.needs)
    ]
    return [reads, writes, bash]


@dataclass(slots=True)
class Outcome:
    """What became of one attack."""

    attack: Attack
    card: bool = False
    """The phone got a permission card for it."""
    blocked: bool = False
    """The gate blocked it (the tool result says so)."""
    result: str = ""
    """The tool result the model received (its start)."""
    cli_refused: bool = False
    """Claude Code refused the call itself, before any permission check (an unread file, a
    binary file): it never ran."""
    effects: Effects | None = None
    """What it did on disk, when the scenario ran it in a turn of its own."""


@dataclass(slots=True)
class Observed:
    """Everything a run saw."""

    outcomes: list[Outcome]
    effects: Effects
    """The whole run's effects outside the project (the canary search included)."""
    model_leaks: list[str] = field(default_factory=list)
    """Canaries found in the requests the mock model received."""
    upload_leaks: list[str] = field(default_factory=list)
    """Canaries found in what the attacker's web server received."""
    sandboxed: bool | None = None


class RedTeamHome:
    """The throwaway home and what counts as a leak from it.

    Args:
        home: an empty directory (made here).
        sandbox: False writes ``[sandbox] enabled = false`` into the bridge's config.
    """

    def __init__(self, home: Path, *, sandbox: bool) -> None:
        self.home = home
        self.bridge_home = home / ".codedeck"
        self.canaries = make_canaries()
        home.mkdir(parents=True)
        write_home_files(home, self.canaries, bridge_db=False)
        env = {
            "PATH": os.environ.get("PATH", os.defpath),
            "HOME": str(home),
            "GIT_CONFIG_NOSYSTEM": "1",
        }
        subprocess.run(["bash", "-c", setup_script()], cwd=home, env=env, check=True)
        self.bridge_home.mkdir(mode=0o700)
        if not sandbox:  # on by default: the daemon runs on its defaults unless told otherwise
            (self.bridge_home / "config.toml").write_text("[sandbox]\nenabled = false\n")
        self.pristine = home.parent / f"{home.name}-pristine"
        shutil.copytree(home, self.pristine, symlinks=True)

    @property
    def project(self) -> Path:
        """The session's folder."""
        return self.home / PROJECT

    def daemon(self, relay_url: str, mock: MockAnthropic) -> DaemonProcess:
        """The daemon on its defaults in this home, driving the Claude Code CLI."""
        env = {
            **mock.cli_env(self.home / ".claude"),
            "HOME": str(self.home),
            "CODEDECK_AGENT": "claude",
            "GIT_CONFIG_NOSYSTEM": "1",
        }
        return DaemonProcess(self.bridge_home, [relay_url], self.home, env=env)

    def bridge_canaries(self, daemon: DaemonProcess) -> dict[str, bytes]:
        """The bridge's secrets as they would leak: its key (hex, nsec, raw bytes) and the
        database file itself (its header)."""
        keypair = daemon.keypair()
        return {
            "bridge_secret_hex": keypair.secret_hex.encode(),
            "bridge_nsec": keypair.nsec.encode(),
            "bridge_secret_raw": keypair.secret,
            "bridge_db_file": b"SQLite format 3\x00",
        }

    def snapshot(self) -> Snapshot:
        """The home outside the project and :data:`AGENT_STATE`."""
        return snapshot(self.home, ignore=AGENT_STATE)

    def restore(self) -> None:
        """Put back what an attack changed: the project's content (in place: the agent works in
        it), every file outside it but :data:`AGENT_STATE`, and the bare repository's refs."""
        for entry in self.project.iterdir():
            _delete(entry)
        for entry in (self.pristine / PROJECT).iterdir():
            _copy(entry, self.project / entry.name)
        now = self.snapshot()
        was = snapshot(self.pristine, ignore=AGENT_STATE)
        for rel in sorted(set(now.entries) | set(was.entries), key=len):
            if now.entries.get(rel) == was.entries.get(rel):
                continue
            target = self.home / rel
            _delete(target)
            if rel in was.entries:
                _copy(self.pristine / rel, target)
        bare = self.home / "remote.git"
        for ref in now.refs.keys() - was.refs.keys():
            _git(bare, "update-ref", "-d", ref)
        for ref, sha in was.refs.items():
            if now.refs.get(ref) != sha:
                _git(bare, "update-ref", ref, sha)


def _git(bare: Path, *args: str) -> None:
    subprocess.run(["git", "--git-dir", str(bare), *args], check=True, capture_output=True)


def _delete(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        path.chmod(0o700)
        for root, dirs, _files in os.walk(path):
            for name in dirs:
                entry = Path(root) / name
                if not entry.is_symlink():
                    entry.chmod(0o700)
        shutil.rmtree(path)


def _copy(source: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    if source.is_dir() and not source.is_symlink():
        shutil.copytree(source, target, symlinks=True)
    else:
        shutil.copy2(source, target, follow_symlinks=False)


async def open_session(phone: PhoneSimulator, cwd: Path) -> str:
    """A Claude Code session in `cwd`, switched to mode ``default``."""
    mark = phone.mark()
    await phone.send(CreateSessionCommand(cwd=str(cwd)))
    done = await phone.wait_for(("session-ready", "session-failed"), after=mark, timeout=WAIT)
    assert done.message.type == "session-ready", done.message
    session = str(done.message.session.id)
    await phone.send(ModeCommand(sessionId=session, mode="default"))
    await phone.wait_for("mode-confirmed", lambda m: m.mode == "default", after=mark, timeout=WAIT)
    return session


def _special(message: Any) -> str | None:
    metadata = getattr(getattr(message, "entry", None), "metadata", None) or {}
    special = metadata.get("special")
    return special if isinstance(special, str) else None


async def answer_cards(phone: PhoneSimulator, session: str, *, allow: bool, seen: set[str]) -> None:
    """Answer every permission card of `session` as it arrives (until cancelled); the tool ids
    of the cards go into `seen`."""
    cursor = 0
    while True:
        messages = phone.messages("output", after=cursor)
        cursor = phone.mark()
        for received in messages:
            message = received.message
            if message.sessionId != session or _special(message) != "permission_request":
                continue
            request = str(message.entry.metadata["tool_use_id"])
            if request in seen:
                continue
            seen.add(request)
            await phone.send(
                PermissionResCommand(sessionId=session, requestId=request, allow=allow)
            )
        await asyncio.sleep(0.05)


def _stream_end(message: Any) -> bool:
    entry = getattr(message, "entry", None)
    return entry is not None and (entry.metadata or {}).get("stream_end") is True


async def run_turn(phone: PhoneSimulator, session: str, attacks: Sequence[Attack]) -> None:
    """One prompt whose reply makes every call of `attacks` at once; waits for the turn's end."""
    prompt = " ".join(["[[say: red team]]", *(a.directive() for a in attacks), "[[after: done]]"])
    mark = phone.mark()
    await phone.send(InputCommand(sessionId=session, text=prompt))
    await phone.wait_for("output", _stream_end, after=mark, timeout=TURN_WAIT)


def tool_calls(mock: MockAnthropic, after: int) -> tuple[dict[str, Any], dict[str, str]]:
    """From the model's requests since index `after`: tool id → its call, tool id → result."""
    calls: dict[str, Any] = {}
    results: dict[str, str] = {}
    for request in mock.message_requests()[after:]:
        for message in request.body.get("messages", []) if isinstance(request.body, dict) else []:
            content = message.get("content")
            if not isinstance(content, list):
                continue
            for block in content:
                if not isinstance(block, dict):
                    continue
                if block.get("type") == "tool_use":
                    calls[str(block.get("id"))] = block
                elif block.get("type") == "tool_result":
                    results[str(block.get("tool_use_id"))] = _result_text(block.get("content"))
    return calls, results


def _result_text(content: object) -> str:
    if isinstance(content, list):
        return " ".join(str(item.get("text", "")) for item in content if isinstance(item, dict))
    return str(content or "")


def match_outcomes(
    turns: Sequence[Sequence[Attack]],
    calls: Mapping[str, Any],
    results: Mapping[str, str],
    cards: Iterable[str],
) -> list[Outcome]:
    """Each attack's card, block and result, found by its tool call's input (the CLI may add
    fields of its own to the input it replays, ``replace_all`` for instance)."""
    carded = set(cards)
    outcomes = []
    for attack in (a for turn in turns for a in turn):
        tool_id = next(
            (
                tool_id
                for tool_id, call in calls.items()
                if call.get("name") == attack.tool
                and isinstance(call.get("input"), dict)
                and all(call["input"].get(key) == value for key, value in attack.input.items())
            ),
            None,
        )
        result = results.get(tool_id, "(no call)") if tool_id else "(no call)"
        outcomes.append(
            Outcome(
                attack,
                card=tool_id in carded,
                blocked=_BLOCKED in result,
                result=result[:300],
                cli_refused=result.startswith(_CLI_REFUSED) and _BLOCKED not in result,
            )
        )
    return outcomes


def mock_mark(mock: MockAnthropic) -> tuple[int, set[str]]:
    """Where the model's requests stand: their count, and the tool results already sent."""
    count = len(mock.message_requests())
    return count, set(tool_calls(mock, max(count - 1, 0))[1])  # the last request holds them all


def new_results(mock: MockAnthropic, mark: tuple[int, set[str]]) -> list[bytes]:
    """The tool results the model received since `mark` (each request repeats the history)."""
    count, known = mark
    results = tool_calls(mock, count)[1]
    return [text.encode() for tool_id, text in results.items() if tool_id not in known]


def _read(path: object) -> Attack:
    return Attack("read-first", "secret", "Read", {"file_path": path})


def _request_blobs(mock: MockAnthropic, after: int) -> list[bytes]:
    return [json.dumps(r.body).encode() for r in mock.message_requests()[after:]]


async def run_scenario(
    home: RedTeamHome,
    relay_url: str,
    mock: MockAnthropic,
    server: ScriptServer,
    *,
    allow: bool,
    turn_per_attack: bool = False,
) -> Observed:
    """Start the daemon in `home`, pair a phone, open a session in ``~/proj`` and send the
    attacks; every card is answered with `allow`.

    Args:
        turn_per_attack: one turn per attack, the home restored after each (slow, but each
            attack's own effects are known: the sandbox-off report); else one turn with every
            Bash call and the reads, and one with the writes.
    """
    turns = all_attacks(home.home, server.url)
    async with home.daemon(relay_url, mock) as daemon:
        phone = await pair_phone(daemon, relay_url)
        try:
            session = await open_session(phone, home.project)
            canaries = {**home.canaries, **home.bridge_canaries(daemon)}
            seen: set[str] = set()
            answering = asyncio.ensure_future(answer_cards(phone, session, allow=allow, seen=seen))
            requests = len(mock.message_requests())
            posted = len(server.posted)
            before = home.snapshot()
            per_attack: dict[str, Effects] = {}
            try:
                if turn_per_attack:
                    for attack in (a for turn in turns for a in turn):
                        if attack.tool in ("Write", "Edit"):  # Claude Code writes what it read
                            await run_turn(phone, session, [_read(attack.input["file_path"])])
                        start, sent, uploads = home.snapshot(), mock_mark(mock), len(server.posted)
                        await run_turn(phone, session, [attack])
                        said = [*new_results(mock, sent), *server.posted[uploads:]]
                        per_attack[attack.id] = effects(
                            home.home, start, home.snapshot(), canaries, output=said
                        )
                        home.restore()
                else:
                    for turn in turns:
                        await run_turn(phone, session, turn)
            finally:
                answering.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await answering
            after = home.snapshot()
            found = effects(home.home, before, after, canaries)
            calls, results = tool_calls(mock, requests)
            outcomes = match_outcomes(turns, calls, results, seen)
            for outcome in outcomes:
                outcome.effects = per_attack.get(outcome.attack.id)
            info = phone.sessions.get(session)
            return Observed(
                outcomes,
                found,
                model_leaks=leaked_in(_request_blobs(mock, requests), canaries),
                upload_leaks=leaked_in(server.posted[posted:], canaries),
                sandboxed=getattr(getattr(info, "info", None), "sandboxed", None),
            )
        finally:
            await phone.close()
