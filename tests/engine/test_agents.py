"""Agents other than Claude Code: choosing one, the heartbeat's ``agents`` and ``opencode``,
``create-session`` / ``models-request`` with ``backend`` and ``agent``, restoring the agent."""

from __future__ import annotations

import itertools

import pytest

from bridge.engine.agents import (
    CLAUDE,
    AgentCatalog,
    AgentCheck,
    ConfiguredAgent,
    Refused,
    backend_of,
)
from bridge.engine.core import Engine, EngineConfig, EngineState
from bridge.engine.effects import (
    Commit,
    Effect,
    ListModels,
    PairedPhone,
    SaveSession,
    SessionRecord,
    StartRunner,
)
from bridge.engine.inputs import AgentReady, AgentsChecked, ModelsListed
from bridge.nostr.nip44 import ConversationKeyCache, decrypt
from bridge.protocol import (
    CreateSessionCommand,
    ModelEntry,
    ModelsMessage,
    ModelsRequestCommand,
    SessionFailedMessage,
)
from bridge.protocol.codec import decode_bridge_to_phone, encode

from .test_core import BRIDGE, NOW, PHONE, ROOT, command_event, published

OPENCODE = ConfiguredAgent("opencode", "OpenCode")
GEMINI = ConfiguredAgent("gemini", "Gemini CLI")
STARTED = (AgentCheck("opencode", True), AgentCheck("gemini", True))


def make_engine(
    *agents: ConfiguredAgent, checks: tuple[AgentCheck, ...] = (), **state: object
) -> Engine:
    keys = ConversationKeyCache(BRIDGE.secret)
    counter = (f"id-{n:04d}" for n in itertools.count(1))
    engine = Engine(
        EngineConfig(bridge_pubkey=BRIDGE.public_hex, machine="box", roots=(ROOT,), agents=agents),
        EngineState(
            phones=[PairedPhone(PHONE.public_hex, PHONE.npub, "phone", "2026-01-01T00:00:00Z")],
            **state,  # type: ignore[arg-type]
        ),
        decrypt=lambda author, payload: decrypt(payload, keys.get(author)),
        new_id=lambda: next(counter),
        now=NOW,
    )
    if checks:
        engine.handle(AgentsChecked(checks), NOW)
    return engine


def failure(effects: list[Effect]) -> str:
    """The reason of the one ``session-failed`` among `effects`."""
    (message,) = [
        p.message
        for e in effects
        if isinstance(e, Commit)
        for p in e.outbox
        if isinstance(p.message, SessionFailedMessage)
    ]
    return message.reason


def models_reply(effects: list[Effect]) -> ModelsMessage:
    (message,) = [
        p.message
        for e in effects
        if isinstance(e, Commit)
        for p in e.outbox
        if isinstance(p.message, ModelsMessage)
    ]
    return message


# --- the catalog ---------------------------------------------------------------------------

CHOICES = [
    ("neither", None, None, CLAUDE),
    ("backend-claude", "claude-code", None, CLAUDE),
    ("agent-claude", None, "claude", CLAUDE),
    ("backend-opencode", "opencode", None, "opencode"),
    ("agent-opencode", None, "opencode", "opencode"),
    ("both-agree", "opencode", "opencode", "opencode"),
    ("agent-gemini", None, "gemini", "gemini"),
    ("claude-backend-gemini-agent", "claude-code", "gemini", Refused),
    ("opencode-backend-claude-agent", "opencode", "claude", Refused),
]


@pytest.mark.parametrize(
    ("backend", "agent", "expected"), [c[1:] for c in CHOICES], ids=[c[0] for c in CHOICES]
)
def test_choose(backend: str | None, agent: str | None, expected: object) -> None:
    catalog = AgentCatalog([OPENCODE, GEMINI])
    catalog.checked(STARTED)
    chosen = catalog.choose(backend, agent)  # type: ignore[arg-type]
    if expected is Refused:
        assert isinstance(chosen, Refused) and "name different agents" in chosen.reason
    else:
        assert chosen == expected


def test_an_agent_is_offered_only_once_its_check_passed() -> None:
    catalog = AgentCatalog([OPENCODE, GEMINI])
    checking = catalog.choose("opencode", None)
    assert isinstance(checking, Refused) and "still checking" in checking.reason
    assert catalog.offered_ids() == (CLAUDE,)
    assert catalog.checked([AgentCheck("opencode", True), AgentCheck("gemini", False, "boom")])
    assert catalog.offered_ids() == (CLAUDE, "opencode")
    failed = catalog.choose(None, "gemini")
    assert failed == Refused("Gemini CLI is not available on this machine: boom")
    assert not catalog.checked([AgentCheck("opencode", True)])  # nothing changed
    assert catalog.checked([AgentCheck("opencode", False, "gone")])
    assert catalog.offered_ids() == (CLAUDE,)
    assert not catalog.checked([AgentCheck("stranger", True)])  # not configured: ignored


def test_unconfigured_agents_are_refused_readably() -> None:
    catalog = AgentCatalog()
    opencode = catalog.choose("opencode", None)
    assert isinstance(opencode, Refused)
    assert opencode.reason.startswith("OpenCode is not available on this machine")
    assert "agents.opencode.command" in opencode.reason
    assert catalog.choose(None, "gemini") == Refused(
        'no agent "gemini" is configured on this machine'
    )


def test_descriptors_and_capability() -> None:
    catalog = AgentCatalog([GEMINI, OPENCODE])
    assert [d.id for d in catalog.descriptors()] == [CLAUDE]
    assert catalog.capabilities(("sync/1",)) == ("sync/1",)
    catalog.checked(STARTED)
    claude, gemini, opencode = catalog.descriptors()
    assert (claude.id, claude.label, gemini.label, opencode.id) == (
        "claude",
        "Claude Code",
        "Gemini CLI",
        "opencode",
    )
    assert claude.modes == gemini.modes == ["default", "acceptEdits", "plan"]
    assert claude.efforts == ["low", "medium", "high", "xhigh", "max", "auto"]
    assert gemini.efforts == []
    assert claude.supports.providers and claude.supports.usage
    assert not opencode.supports.providers and not opencode.supports.usage
    assert opencode.supports.models and opencode.supports.interrupt
    assert catalog.capabilities(("sync/1",)) == ("sync/1", "opencode")
    assert backend_of("opencode") == "opencode"
    assert backend_of(CLAUDE) is None and backend_of("gemini") is None


# --- the heartbeat -------------------------------------------------------------------------


def test_the_heartbeat_advertises_opencode_after_its_check() -> None:
    engine = make_engine(OPENCODE, GEMINI)
    beat = engine.heartbeat_message()
    assert "opencode" not in (beat.capabilities or [])
    assert [a.id for a in beat.agents or []] == [CLAUDE]
    engine.heartbeat.publish(NOW)  # the boot heartbeat went out
    assert engine.handle(AgentsChecked(STARTED), NOW + 5) == []
    assert engine.next_deadline() == NOW + 5 + engine.config.heartbeat_debounce
    beat = engine.heartbeat_message()
    assert (beat.capabilities or [])[-1] == "opencode"
    assert [a.id for a in beat.agents or []] == [CLAUDE, "opencode", "gemini"]
    # A v10 phone strips what it does not know: the heartbeat still decodes and keeps them.
    decoded = decode_bridge_to_phone(encode(beat))
    assert decoded == beat


def test_a_failed_check_leaves_the_heartbeat_as_it_was() -> None:
    engine = make_engine(OPENCODE)
    engine.heartbeat.publish(NOW)
    engine.handle(AgentsChecked((AgentCheck("opencode", False, "not found"),)), NOW + 5)
    assert engine.next_deadline() == NOW + engine.config.heartbeat_interval
    assert "opencode" not in (engine.heartbeat_message().capabilities or [])


# --- create-session ------------------------------------------------------------------------


def test_create_session_with_backend_opencode_runs_opencode() -> None:
    engine = make_engine(OPENCODE, checks=STARTED[:1])
    effects = engine.handle(command_event(CreateSessionCommand(backend="opencode")), NOW)
    start = effects[-1]
    assert isinstance(start, StartRunner) and start.record.agent == "opencode"
    saved = [op for e in effects if isinstance(e, Commit) for op in e.ops]
    assert any(isinstance(op, SaveSession) and op.record.agent == "opencode" for op in saved)
    session_id = start.record.session_id
    ready = engine.handle(AgentReady(session_id, "ses_1", "mock/mock-model", ROOT), NOW + 1)
    assert ("session-ready", (PHONE.public_hex,)) in published(ready)
    (info,) = engine.heartbeat_message().sessions
    assert (info.backend, info.agent) == ("opencode", "opencode")


def test_create_session_with_agent_runs_that_agent_and_claude_stays_the_default() -> None:
    engine = make_engine(OPENCODE, GEMINI, checks=STARTED)
    gemini = engine.handle(command_event(CreateSessionCommand(agent="gemini")), NOW)
    assert isinstance(gemini[-1], StartRunner) and gemini[-1].record.agent == "gemini"
    claude = engine.handle(command_event(CreateSessionCommand(), created_at=NOW + 1), NOW + 1)
    assert isinstance(claude[-1], StartRunner) and claude[-1].record.agent == CLAUDE
    engine.handle(AgentReady(gemini[-1].record.session_id, "g", None, ROOT), NOW + 2)
    engine.handle(AgentReady(claude[-1].record.session_id, "c", "m", ROOT), NOW + 2)
    infos = {i.agent: i for i in engine.heartbeat_message().sessions}
    # v10's vocabulary has no word for Gemini; Claude Code's sessions keep an absent backend.
    assert infos["gemini"].backend is None and infos[CLAUDE].backend is None


REFUSALS = [
    ("not-configured", (), CreateSessionCommand(backend="opencode"), "OpenCode is not available"),
    ("checking", (OPENCODE,), CreateSessionCommand(backend="opencode"), "still checking"),
    (
        "conflict",
        (OPENCODE,),
        CreateSessionCommand(backend="claude-code", agent="opencode"),
        'backend "claude-code" and agent "opencode" name different agents',
    ),
    (
        "provider",
        (OPENCODE,),
        CreateSessionCommand(backend="opencode", providerId="kimi"),
        "provider profiles apply to Claude Code sessions only; OpenCode",
    ),
    ("unknown", (OPENCODE,), CreateSessionCommand(agent="codex"), 'no agent "codex"'),
]


@pytest.mark.parametrize(
    ("agents", "command", "reason"), [c[1:] for c in REFUSALS], ids=[c[0] for c in REFUSALS]
)
def test_create_session_refusals(
    agents: tuple[ConfiguredAgent, ...], command: CreateSessionCommand, reason: str
) -> None:
    checks = STARTED[:1] if agents and "checking" not in reason else ()
    engine = make_engine(*agents, checks=checks)
    effects = engine.handle(command_event(command), NOW)
    assert published(effects) == [
        ("session-pending", (PHONE.public_hex,)),
        ("session-failed", (PHONE.public_hex,)),
    ]
    assert reason in failure(effects)
    assert not any(isinstance(e, StartRunner) for e in effects)
    assert engine.session_records() == []


def test_a_failed_check_is_the_refusals_reason() -> None:
    engine = make_engine(OPENCODE, checks=(AgentCheck("opencode", False, "opencode exited"),))
    effects = engine.handle(command_event(CreateSessionCommand(backend="opencode")), NOW)
    assert failure(effects) == "OpenCode is not available on this machine: opencode exited"


def test_a_restored_session_keeps_its_agent() -> None:
    record = SessionRecord("s-1", "/ws", "t", "t", state="idle", agent="opencode")
    engine = make_engine(OPENCODE, sessions=[record])
    (start,) = [e for e in engine.boot(NOW) if isinstance(e, StartRunner)]
    # Restored whatever the check says: a session that no longer can run fails at its start.
    assert start.resume and start.record.agent == "opencode"
    assert engine.heartbeat_message().sessions[0].backend == "opencode"


# --- models-request ------------------------------------------------------------------------


def test_models_request_without_an_agent_is_claude_codes() -> None:
    engine = make_engine(OPENCODE, checks=STARTED[:1])
    assert engine.handle(command_event(ModelsRequestCommand()), NOW)[-1] == ListModels()
    listed = engine.handle(ModelsListed((ModelEntry(id="opus"),)), NOW)
    assert models_reply(listed) == ModelsMessage(models=[ModelEntry(id="opus")])


@pytest.mark.parametrize(
    "command",
    [ModelsRequestCommand(backend="opencode"), ModelsRequestCommand(agent="opencode")],
    ids=["backend", "agent"],
)
def test_models_request_for_opencode(command: ModelsRequestCommand) -> None:
    engine = make_engine(OPENCODE, checks=STARTED[:1])
    assert engine.handle(command_event(command), NOW)[-1] == ListModels("opencode")
    models = (ModelEntry(id="mock/mock-model", label="Mock Model"),)
    reply = models_reply(engine.handle(ModelsListed(models, agent="opencode"), NOW))
    assert reply == ModelsMessage(models=list(models), agent="opencode")
    empty = models_reply(engine.handle(ModelsListed((), agent="opencode"), NOW))
    assert empty.models == [] and empty.agent == "opencode"
    assert empty.error == "OpenCode listed no model — start a session with it and try again."


def test_models_request_for_an_agent_not_offered_is_answered_with_the_reason() -> None:
    engine = make_engine()
    effects = engine.handle(command_event(ModelsRequestCommand(backend="opencode")), NOW)
    assert not any(isinstance(e, ListModels) for e in effects)
    reply = models_reply(effects)
    assert reply.models == [] and reply.agent == "opencode"
    assert reply.error is not None and reply.error.startswith("OpenCode is not available")
