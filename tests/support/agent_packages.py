"""The real ACP agents (OpenCode, Gemini CLI), installed from the npm registry on first use.

End-to-end tests of the ACP runner must run the agents users run, not stand-ins, and must run
them offline against the local mock model APIs (:mod:`tests.support.mock_anthropic`,
:mod:`tests.support.mock_gemini`). Both agents ship as npm packages that carry everything they
need (OpenCode's 185 MB ELF arrives in the per-platform package ``opencode-linux-x64``; Gemini CLI
is one JS bundle), so ``npm install`` from the registry is the whole installation: nothing is
downloaded from elsewhere at install or run time.

Each pinned package goes into its own prefix under ``tests/.agents/`` (gitignored), e.g.
``tests/.agents/opencode-ai@1.18.33/``, so a version bump is a new directory and two pins never
share a ``node_modules``. The install runs once:

- **fast path**: the prefix holds a ``.installed`` stamp naming the pinned spec → no npm at all
  (a stat or two; measured well under a millisecond);
- **slow path**: an exclusive ``flock`` on ``tests/.agents/<name>.lock`` serialises concurrent
  installers (two pytest processes, xdist workers); whoever gets the lock second finds the stamp
  and returns. The stamp is written only after the install succeeded and the binary answered
  ``--version``, so a killed install is redone, never half-trusted.

Failure policy (decided here, once): no ``node``/``npm`` on PATH raises :class:`AgentUnavailable`,
which tests turn into ``pytest.skip(reason)`` (CI has node 20 / npm 11, so there they really run);
npm present but the install failing raises :class:`AgentInstallError` with the tail of npm's
stderr, which tests let FAIL. A broken registry or pin must never look like a skipped test.

OpenCode's npm package ``opencode-ai`` ships a stub ``bin/opencode`` replaced by its postinstall
with the platform binary. npm 11 may refuse to run install scripts (and ``--ignore-scripts``
or pnpm never run them), so :func:`opencode_acp_command` execs the platform package's
``bin/opencode`` directly when the stub is still in place, as codedeck-plus does.

Gemini CLI must be run as ``node <pkg>/bundle/gemini.js --acp`` (``--experimental-acp`` is
deprecated in 0.61).

Measured on this machine (2 cores, npm 11.19.1, node 20.20.2, from the npm registry):

==============================  =========================  ==========================  =========
package                         npm install, empty cache   first use, warm npm cache   on disk
==============================  =========================  ==========================  =========
``opencode-ai@1.18.33``         8.1 s                      11.5 s                      354 MB
``@google/gemini-cli@0.61.0``   8.4 s                      8.7 s                       100 MB
==============================  =========================  ==========================  =========

(OpenCode's prefix holds both ``opencode-linux-x64`` and ``-baseline``: npm installs every
optional platform package matching os/cpu; its postinstall did run under npm 11 here and made
``.bin/opencode`` the ELF.) Later uses take the fast path: 0.6 ms for both.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "AGENTS_DIR",
    "GEMINI",
    "OPENCODE",
    "AgentInstallError",
    "AgentPackage",
    "AgentUnavailable",
    "ensure_installed",
    "gemini_acp_command",
    "opencode_acp_command",
]

AGENTS_DIR = Path(__file__).resolve().parent.parent / ".agents"
"""Where the pinned agents live (``tests/.agents/``, gitignored)."""

_INSTALL_TIMEOUT = 900.0
_VERSION_TIMEOUT = 60.0
_STDERR_TAIL = 2000
_STAMP = ".installed"
_NPM_FLAGS = ("--no-audit", "--no-fund", "--no-update-notifier", "--loglevel=error")


class AgentUnavailable(RuntimeError):
    """node or npm is missing: the agent cannot be installed here (tests skip with the reason)."""


class AgentInstallError(RuntimeError):
    """npm is present but installing or running the pinned package failed (tests fail)."""


@dataclass(frozen=True, slots=True)
class AgentPackage:
    """One pinned npm package that provides an ACP agent."""

    name: str
    version: str

    @property
    def spec(self) -> str:
        return f"{self.name}@{self.version}"

    @property
    def prefix(self) -> Path:
        """The package's own ``npm --prefix`` directory (``/`` of scoped names → ``+``)."""
        return AGENTS_DIR / self.spec.replace("/", "+")

    @property
    def package_dir(self) -> Path:
        return self.prefix / "node_modules" / self.name


OPENCODE = AgentPackage("opencode-ai", "1.18.33")
GEMINI = AgentPackage("@google/gemini-cli", "0.61.0")


def _require(tool: str) -> str:
    found = shutil.which(tool)
    if found is None:
        raise AgentUnavailable(f"{tool} is not installed (needed to run the real ACP agents)")
    return found


def _installed_version(package: AgentPackage) -> str | None:
    try:
        data = json.loads((package.package_dir / "package.json").read_text())
    except (OSError, ValueError):
        return None
    version = data.get("version") if isinstance(data, dict) else None
    return version if isinstance(version, str) else None


def _stamped(package: AgentPackage) -> bool:
    try:
        return (package.prefix / _STAMP).read_text().strip() == package.spec
    except OSError:
        return False


def _tail(text: str) -> str:
    text = text.strip()
    return text if len(text) <= _STDERR_TAIL else "…" + text[-_STDERR_TAIL:]


def _npm_install(package: AgentPackage) -> float:
    """Run ``npm install`` of the pin into its prefix; the seconds it took."""
    npm = _require("npm")
    package.prefix.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    try:
        proc = subprocess.run(
            [npm, "install", "--prefix", str(package.prefix), package.spec, *_NPM_FLAGS],
            capture_output=True,
            text=True,
            timeout=_INSTALL_TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        stderr = exc.stderr.decode() if isinstance(exc.stderr, bytes) else (exc.stderr or "")
        raise AgentInstallError(
            f"npm install {package.spec} timed out after {_INSTALL_TIMEOUT:.0f} s: {_tail(stderr)}"
        ) from exc
    if proc.returncode != 0:
        raise AgentInstallError(
            f"npm install {package.spec} failed (exit {proc.returncode}): "
            f"{_tail(proc.stderr or proc.stdout)}"
        )
    if _installed_version(package) != package.version:
        raise AgentInstallError(
            f"npm install {package.spec} left version {_installed_version(package)!r} "
            f"in {package.package_dir}"
        )
    return time.monotonic() - started


def ensure_installed(package: AgentPackage) -> Path:
    """The prefix of `package`, installing the pin first if needed (see the module docstring).

    Raises:
        AgentUnavailable: node or npm is not on PATH.
        AgentInstallError: npm failed, or the installed binary does not run.
    """
    _require("node")
    if _stamped(package):
        return package.prefix
    AGENTS_DIR.mkdir(parents=True, exist_ok=True)
    lock_path = AGENTS_DIR / f"{package.spec.replace('/', '+')}.lock"
    with lock_path.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if _stamped(package):
            return package.prefix  # another process installed it while we waited
        if _installed_version(package) != package.version:
            _npm_install(package)
        _check_runs([*_agent_argv(package)[:-1], "--version"], package)
        (package.prefix / _STAMP).write_text(package.spec + "\n")
    return package.prefix


def _check_runs(argv: list[str], package: AgentPackage) -> None:
    """Run ``<agent> --version`` once so a broken install fails here, not mid-test."""
    try:
        proc = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=_VERSION_TIMEOUT,
            check=False,
            env={**os.environ, "NO_COLOR": "1"},
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise AgentInstallError(f"{package.spec}: {argv} did not run: {exc}") from exc
    if proc.returncode != 0 or package.version not in proc.stdout:
        raise AgentInstallError(
            f"{package.spec}: {' '.join(argv)} exited {proc.returncode}, "
            f"stdout {proc.stdout.strip()[:200]!r}, stderr {_tail(proc.stderr)}"
        )


def _is_stub(path: Path) -> bool:
    """True for opencode-ai's placeholder script (postinstall not run), False for an ELF."""
    try:
        with path.open("rb") as f:
            return not f.read(4).startswith(b"\x7fELF")
    except OSError:
        return True


def _opencode_binary(package: AgentPackage) -> Path:
    bin_link = package.prefix / "node_modules" / ".bin" / "opencode"
    if bin_link.exists() and not _is_stub(bin_link.resolve()):
        return bin_link
    # The postinstall did not replace the stub: use a platform package's binary directly.
    modules = package.prefix / "node_modules"
    candidates = sorted(modules.glob("opencode-*/bin/opencode"))
    # Prefer the plain build over -baseline/-musl when several were installed.
    candidates.sort(key=lambda p: (p.parent.parent.name.count("-"), p.parent.parent.name))
    for candidate in candidates:
        if not _is_stub(candidate) and os.access(candidate, os.X_OK):
            return candidate
    raise AgentInstallError(
        f"{package.spec}: no runnable opencode binary under {modules} "
        "(neither .bin/opencode nor a platform package's bin/opencode)"
    )


def _agent_argv(package: AgentPackage) -> list[str]:
    """The ACP command line of an installed package (without the install check)."""
    if package.name == OPENCODE.name:
        return [str(_opencode_binary(package)), "acp"]
    if package.name == GEMINI.name:
        return [_require("node"), str(package.package_dir / "bundle" / "gemini.js"), "--acp"]
    raise ValueError(f"no ACP command known for {package.spec}")


def opencode_acp_command() -> list[str]:
    """``[<opencode binary>, "acp"]`` for the pinned OpenCode, installing it on first use."""
    ensure_installed(OPENCODE)
    return _agent_argv(OPENCODE)


def gemini_acp_command() -> list[str]:
    """``[node, <pkg>/bundle/gemini.js, "--acp"]`` for the pinned Gemini CLI (installed on use)."""
    ensure_installed(GEMINI)
    return _agent_argv(GEMINI)
