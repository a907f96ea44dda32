"""Fixtures for driving the real ACP agents: one mock model API per test, one agent setup per test.

An :class:`AgentSetup` is everything one test needs to run an agent: its argv (the pinned npm
package, installed on first use by :mod:`tests.support.agent_packages`), the full isolated
environment (HOME/XDG under ``tmp_path``; :mod:`tests.support.opencode_env`,
:func:`tests.support.mock_gemini.gemini_env`), a workspace, and the ACP handshake that agent needs
(Gemini CLI must ``authenticate`` with ``gemini-api-key`` before ``session/new``).
:meth:`AgentSetup.start` spawns a fresh process with the same state dirs, so a second process sees
the first one's sessions (``session/load``).

Missing node/npm skips the tests with the reason; an npm that fails to install the pin FAILS them
(:class:`~tests.support.agent_packages.AgentInstallError` is not caught). Mock servers are
function-scoped: each test's server is on 127.0.0.1, port 0, and stopped when the test ends.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import acp
import pytest
from acp import schema

from tests.support.acp_recorder import AgentRun, RecordingClient, run_agent
from tests.support.agent_packages import (
    AgentUnavailable,
    gemini_acp_command,
    opencode_acp_command,
)
from tests.support.mock_anthropic import MockAnthropic
from tests.support.mock_gemini import MockGemini, gemini_env
from tests.support.opencode_env import ASK_EVERYTHING, opencode_env

AGENTS = ("opencode", "gemini")
GEMINI_AUTH = "gemini-api-key"


@dataclass
class Session:
    """An initialized agent with one session: the run, the handshake's answers, the client."""

    run: AgentRun
    client: RecordingClient
    init: schema.InitializeResponse
    session_id: str
    opened: dict[str, Any]
    """The ``session/new`` (or ``session/load``) result as wire JSON."""
    startup_seconds: float
    """Spawn → ``session/new`` answered."""

    @property
    def conn(self) -> Any:
        return self.run.conn

    async def prompt(self, *texts: str) -> dict[str, Any]:
        """Send one prompt (one text block per argument); the result as wire JSON."""
        result = await self.conn.prompt(
            session_id=self.session_id, prompt=[acp.text_block(t) for t in texts]
        )
        dumped = result.model_dump(by_alias=True, exclude_none=True, mode="json")
        assert isinstance(dumped, dict)
        return dumped


@dataclass
class AgentSetup:
    """One agent, configured for one test (see the module docstring)."""

    name: str
    command: list[str]
    env: dict[str, str]
    workspace: Path
    logs: Path
    mock: MockAnthropic | MockGemini
    auth_method: str | None

    @contextlib.asynccontextmanager
    async def start(
        self, client: RecordingClient, *, load: str | None = None
    ) -> AsyncIterator[Session]:
        """Spawn, initialize, authenticate if needed, then open a new session (or `load` one)."""
        log = self.logs / f"{self.name}-{time.monotonic_ns()}.log"
        async with run_agent(
            client, self.command, env=self.env, cwd=self.workspace, log_path=log
        ) as run:
            init = await run.conn.initialize(
                protocol_version=acp.PROTOCOL_VERSION,
                client_capabilities=schema.ClientCapabilities(),
                client_info=schema.Implementation(name="codedeck-tests", version="0"),
            )
            if self.auth_method is not None:
                await run.conn.authenticate(method_id=self.auth_method)
            if load is None:
                response: Any = await run.conn.new_session(cwd=str(self.workspace), mcp_servers=[])
                session_id = response.session_id
            else:
                response = await run.conn.load_session(
                    cwd=str(self.workspace), session_id=load, mcp_servers=[]
                )
                session_id = load
            opened = (
                response.model_dump(by_alias=True, exclude_none=True, mode="json")
                if response is not None
                else {}
            )
            yield Session(run, client, init, session_id, opened, time.monotonic() - run.started_at)


def _command(build: Callable[[], list[str]]) -> list[str]:
    try:
        return build()
    except AgentUnavailable as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="session")
def opencode_command() -> list[str]:
    return _command(opencode_acp_command)


@pytest.fixture(scope="session")
def gemini_command() -> list[str]:
    return _command(gemini_acp_command)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    (path / "a.txt").write_text("hello world\n")
    return path


@pytest.fixture
def mock_anthropic() -> Iterator[MockAnthropic]:
    with MockAnthropic() as mock:
        yield mock


@pytest.fixture
def mock_gemini() -> Iterator[MockGemini]:
    with MockGemini() as mock:
        yield mock


AgentFactory = Callable[..., AgentSetup]


@pytest.fixture
def opencode(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    workspace: Path,
    mock_anthropic: MockAnthropic,
) -> AgentFactory:
    """OpenCode whose own config ALLOWS bash and edits, with ``OPENCODE_PERMISSION`` asking for
    everything: what a bridge does so that every tool call reaches its gate."""
    command = request.getfixturevalue("opencode_command")

    def make(
        permission: dict[str, Any] | None = None,
        env_permission: dict[str, Any] | None = None,
    ) -> AgentSetup:
        env = opencode_env(
            mock_anthropic,
            tmp_path / "opencode",
            permission=permission or {"bash": "allow", "edit": "allow"},
            env_permission=dict(ASK_EVERYTHING) if env_permission is None else env_permission,
        )
        return AgentSetup(
            "opencode", command, env, workspace, tmp_path / "logs", mock_anthropic, None
        )

    return make


@pytest.fixture
def gemini(
    request: pytest.FixtureRequest, tmp_path: Path, workspace: Path, mock_gemini: MockGemini
) -> AgentFactory:
    """Gemini CLI in its default approval mode (asks before shell commands and edits)."""
    command = request.getfixturevalue("gemini_command")

    def make() -> AgentSetup:
        env = gemini_env(mock_gemini, tmp_path / "gemini")
        return AgentSetup(
            "gemini", command, env, workspace, tmp_path / "logs", mock_gemini, GEMINI_AUTH
        )

    return make


@pytest.fixture(params=AGENTS)
def agent(request: pytest.FixtureRequest) -> AgentSetup:
    """Each agent in turn, in its default test configuration."""
    factory: AgentFactory = request.getfixturevalue(str(request.param))
    return factory()
