"""What the daemon tells a new session host: one JSON line on the host's stdin.

The launch spec travels on a pipe, never in a file or on the command line: it holds the agent's
complete environment, provider tokens included, and a pipe is read once and gone (a file would
stay on disk, argv is world-readable in ``/proc``). The host answers on stdout with one line —
``{"ok": true, "pid": …}`` once it serves its socket, or ``{"ok": false, "error": …}`` — and
then closes stdout; its stderr is its log file from the first byte on.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

import orjson

from bridge.host.driver import DriverSpec
from bridge.host.events import InterruptedInput
from bridge.records import record
from bridge.sandbox.policy import SandboxPolicy

__all__ = [
    "AGENTS",
    "DEFAULT_ORPHAN_TIMEOUT",
    "DEFAULT_UNCLAIMED_TIMEOUT",
    "LaunchError",
    "LaunchSpec",
    "RestartOrder",
    "decode_launch",
    "encode_launch",
]

AGENTS: Final = frozenset({"claude", "scripted", "acp"})
"""The agent kinds a host can run (the driver modules it imports by name)."""
DEFAULT_ORPHAN_TIMEOUT: Final = 3600.0
"""Seconds a host whose agent is idle waits for a daemon before it stops by itself."""
DEFAULT_UNCLAIMED_TIMEOUT: Final = 120.0
"""Seconds a host that no daemon has connected to yet waits for one. Its launcher connects
within milliseconds of the host's answer; a host nobody took over was launched by a daemon that
stopped or died meanwhile, and a daemon restarted by systemd (``RestartSec=5s``) adopts it well
within this. Without it such a host, and its agent, ran on for :data:`DEFAULT_ORPHAN_TIMEOUT`."""


class LaunchError(ValueError):
    """The launch spec is not valid; the text says why (never its values)."""


@record
class RestartOrder:
    """This host resumes a session whose last host ended: what its ``restarted`` record says.

    Attributes:
        reason: why the last one ended.
        count: which restart in a row, of `budget`.
        candidates: the inputs handed to the last agent whose turn is not known to be over;
            those the agent took are the interrupted ones.
        taken: the uids among them the last agent is known to have taken (its host journaled
            it); the others are checked against the agent's own record.
    """

    reason: str
    count: int
    budget: int
    candidates: tuple[InterruptedInput, ...] = ()
    taken: tuple[str, ...] = ()


@record
class LaunchSpec:
    """A host's orders.

    Attributes:
        agent: one of :data:`AGENTS`.
        home: the bridge home (the host's directory is derived from it and the session id).
        driver: what the agent starts with.
        orphan_timeout: seconds without a daemon, agent idle, before the host stops by itself.
        unclaimed_timeout: the same, while no daemon has connected yet (the shorter wins).
        log_level: the host log's level name (``INFO``, ``DEBUG``).
        seq_floor: the daemon's cursor for the session: the journal numbers above it.
        restart: set when this host resumes a session whose last host ended.
    """

    agent: str
    home: Path
    driver: DriverSpec
    orphan_timeout: float = DEFAULT_ORPHAN_TIMEOUT
    unclaimed_timeout: float = DEFAULT_UNCLAIMED_TIMEOUT
    log_level: str = "INFO"
    seq_floor: int = 0
    restart: RestartOrder | None = None


def encode_launch(spec: LaunchSpec) -> bytes:
    """`spec` as one JSON line."""
    driver = spec.driver
    return (
        orjson.dumps(
            {
                "agent": spec.agent,
                "home": str(spec.home),
                "orphan_timeout": spec.orphan_timeout,
                "unclaimed_timeout": spec.unclaimed_timeout,
                "log_level": spec.log_level,
                "seq_floor": spec.seq_floor,
                "restart": _restart_json(spec.restart),
                "driver": {
                    "session_id": driver.session_id,
                    "cwd": driver.cwd,
                    "permission_mode": driver.permission_mode,
                    "model": driver.model,
                    "effort_level": driver.effort_level,
                    "sdk_session_id": driver.sdk_session_id,
                    "resume": driver.resume,
                    "env": dict(driver.env),
                    "options": dict(driver.options),
                    "sandbox": _sandbox_json(driver.sandbox),
                },
            }
        )
        + b"\n"
    )


def decode_launch(line: bytes) -> LaunchSpec:
    """The launch spec of one line.

    Raises:
        LaunchError: not JSON, an unknown agent, or a field of the wrong type.
    """
    try:
        raw = orjson.loads(line)
    except orjson.JSONDecodeError:
        raise LaunchError("the launch spec is not JSON") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("driver"), dict):
        raise LaunchError("the launch spec must be an object with a driver object")
    agent = raw.get("agent")
    if agent not in AGENTS:
        raise LaunchError(f"unknown agent {agent!r}")
    home = _str(raw, "home")
    timeout = _positive(raw, "orphan_timeout", DEFAULT_ORPHAN_TIMEOUT)
    unclaimed = _positive(raw, "unclaimed_timeout", DEFAULT_UNCLAIMED_TIMEOUT)
    level = raw.get("log_level", "INFO")
    if not isinstance(level, str):
        raise LaunchError("log_level must be a string")
    floor = raw.get("seq_floor", 0)
    if not isinstance(floor, int) or isinstance(floor, bool) or floor < 0:
        raise LaunchError("seq_floor must be a non-negative integer")
    d: Mapping[str, Any] = raw["driver"]
    env = d.get("env", {})
    if not isinstance(env, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in env.items()
    ):
        raise LaunchError("driver.env must map strings to strings")
    options = d.get("options", {})
    if not isinstance(options, dict):
        raise LaunchError("driver.options must be an object")
    resume = d.get("resume", False)
    if not isinstance(resume, bool):
        raise LaunchError("driver.resume must be a boolean")
    driver = DriverSpec(
        session_id=_str(d, "session_id"),
        cwd=_str(d, "cwd"),
        permission_mode=_str(d, "permission_mode"),
        model=_opt_str(d, "model"),
        effort_level=_opt_str(d, "effort_level"),
        sdk_session_id=_opt_str(d, "sdk_session_id"),
        resume=resume,
        env=env,
        options=options,
        sandbox=_sandbox(d.get("sandbox")),
    )
    if not driver.session_id:
        raise LaunchError("driver.session_id must not be empty")
    return LaunchSpec(
        str(agent),
        Path(home),
        driver,
        orphan_timeout=timeout,
        unclaimed_timeout=unclaimed,
        log_level=level,
        seq_floor=floor,
        restart=_restart(raw.get("restart")),
    )


_PATH_LISTS: Final = ("writable", "hidden_dirs", "hidden_files", "read_only")


def _sandbox_json(policy: SandboxPolicy | None) -> dict[str, Any] | None:
    if policy is None:
        return None
    out: dict[str, Any] = {"bwrap": policy.bwrap, "cwd": policy.cwd}
    for name in _PATH_LISTS:
        out[name] = list(getattr(policy, name))
    return out


def _sandbox(raw: object) -> SandboxPolicy | None:
    """The sandbox policy of the launch spec: absolute paths only (a relative one would be
    taken from the host's own directory, and an option-like one would be read by bwrap)."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise LaunchError("driver.sandbox must be an object or null")
    lists: dict[str, tuple[str, ...]] = {}
    for name in _PATH_LISTS:
        value = raw.get(name, [])
        if not isinstance(value, list) or not all(_absolute(p) for p in value):
            raise LaunchError(f"driver.sandbox.{name} must be a list of absolute paths")
        lists[name] = tuple(value)
    bwrap, cwd = raw.get("bwrap"), raw.get("cwd")
    if not _absolute(bwrap) or not _absolute(cwd):
        raise LaunchError("driver.sandbox.bwrap and driver.sandbox.cwd must be absolute paths")
    assert isinstance(bwrap, str) and isinstance(cwd, str)
    return SandboxPolicy(bwrap=bwrap, cwd=cwd, **lists)


def _absolute(value: object) -> bool:
    return isinstance(value, str) and value.startswith("/") and "\0" not in value


def _restart_json(order: RestartOrder | None) -> dict[str, Any] | None:
    if order is None:
        return None
    return {
        "reason": order.reason,
        "count": order.count,
        "budget": order.budget,
        "candidates": [{"uid": c.uid, "label": c.label, "text": c.text} for c in order.candidates],
        "taken": list(order.taken),
    }


def _restart(raw: object) -> RestartOrder | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise LaunchError("restart must be an object or null")
    count, budget = raw.get("count"), raw.get("budget")
    if not isinstance(count, int) or not isinstance(budget, int):
        raise LaunchError("restart.count and restart.budget must be integers")
    candidates = raw.get("candidates", [])
    if not isinstance(candidates, list) or not all(
        isinstance(c, dict) and all(isinstance(c.get(k), str) for k in ("uid", "label", "text"))
        for c in candidates
    ):
        raise LaunchError("restart.candidates must be a list of {uid, label, text}")
    taken = raw.get("taken", [])
    if not isinstance(taken, list) or not all(isinstance(t, str) for t in taken):
        raise LaunchError("restart.taken must be a list of strings")
    return RestartOrder(
        _str(raw, "reason"),
        count,
        budget,
        tuple(InterruptedInput(c["uid"], c["label"], c["text"]) for c in candidates),
        tuple(taken),
    )


def _positive(raw: Mapping[str, Any], name: str, default: float) -> float:
    value = raw.get(name, default)
    if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
        raise LaunchError(f"{name} must be a positive number")
    return float(value)


def _str(raw: Mapping[str, Any], name: str) -> str:
    value = raw.get(name)
    if not isinstance(value, str):
        raise LaunchError(f"{name} must be a string")
    return value


def _opt_str(raw: Mapping[str, Any], name: str) -> str | None:
    value = raw.get(name)
    if value is not None and not isinstance(value, str):
        raise LaunchError(f"{name} must be a string or null")
    return value
