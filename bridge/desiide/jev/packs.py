"""The JEV packs' states, built from facts about the workspace: metadata only, bounded.

A pack is a question put to the judge model; its state is everything the judge may see (ADR-005:
"metadata only"): file paths and sizes, counts, a branch, a command line — never a file's
contents. The seed fixes each pack's fields; this module builds exactly those, as the wire dicts
(camelCase) the editor and the judge receive:

=====================  ==========================================================================
pack                   state
=====================  ==========================================================================
``workflow_select@1``  taskType, filesTouched: FileMeta[] (≤50), truncatedCount?,
                       estimatedDiffSize, lastRunStatus, userPreference,
                       availableModels[{id, contextTokens, latencyMs, costTier, locality?}]
``risk_gate@1``        actionType, command? (≤500 chars), editFileCount?,
                       context{branch, env, hasPendingMigrations},
                       filesTouched[{path, sensitive}] (≤50), truncatedCount?
``cost_route@1``       taskType, filesTouchedCount, projectSizeLines, userCostBias,
                       recentFailures
=====================  ==========================================================================

Caps: at most :data:`MAX_FILES` files (the rest counted in ``truncatedCount``, absent when
nothing was cut) and :data:`MAX_COMMAND_CHARS` characters of command (cut with a trailing
``…`` inside the 500). When files must be cut, the sensitive ones are kept first (each group in
the given order): truncation must never hide from the judge the very files that make a call
risky.

``sensitive`` (:func:`is_sensitive`): the daemon's gate has no such notion (it judges commands
and paths, not secrets), so the rule is defined here — env files, keys and certificates, SSH
keys, credential and secret files, package-registry credentials, and anything under ``.git``,
``.ssh``, ``.aws``, ``.gnupg``, ``.kube``, ``.docker``. Case-insensitive.

``hasPendingMigrations`` (:func:`has_pending_migrations`): a heuristic on paths only. True when a
changed or new file of the working tree (not yet committed) lies in a migrations directory —
a path segment ``migrations`` or ``migrate`` (Django, Rails' ``db/migrate``, Prisma, Flyway-style
``db/migration``/``migration``) or ``alembic/versions``. A migration being written or edited
means a schema change that has not shipped; whether a database has applied a committed
migration cannot be told from files, so that case reads False.

Pure: the facts come from :mod:`.gather` (the I/O) or from the task (a proposal's paths).
"""

from __future__ import annotations

import itertools
import posixpath
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final, Literal, Protocol, TypeVar

from bridge.records import record

__all__ = [
    "DEFAULT_PREFERENCE",
    "MAX_COMMAND_CHARS",
    "MAX_FILES",
    "PACK_FORMATS",
    "PACK_NAMES",
    "AvailableModel",
    "FileFacts",
    "LastRunStatus",
    "ModelLike",
    "PackName",
    "available_models",
    "build_cost_route",
    "build_risk_gate",
    "build_workflow_select",
    "cap_command",
    "cap_files",
    "has_pending_migrations",
    "is_sensitive",
]

T = TypeVar("T")

MAX_FILES: Final = 50
MAX_COMMAND_CHARS: Final = 500
DEFAULT_PREFERENCE: Final = "balanced"

PackName = Literal["workflow_select@1", "risk_gate@1", "cost_route@1"]
PACK_NAMES: Final[tuple[PackName, ...]] = ("workflow_select@1", "risk_gate@1", "cost_route@1")
PACK_FORMATS: Final[Mapping[str, Literal["choice", "score", "noul"]]] = {
    "workflow_select@1": "choice",
    "risk_gate@1": "noul",
    "cost_route@1": "score",
}
"""The result format each pack asks the judge for."""

LastRunStatus = Literal["none", "done", "failed", "cancelled"]

_SENSITIVE_NAME: Final = re.compile(
    r"""^(?:
        \.env(?:\..*)?                              # .env, .env.local, .env.production
      | .*\.(?:pem|key|p12|pfx|jks|keystore|kdbx|asc|gpg|ovpn)
      | id_(?:rsa|dsa|ecdsa|ed25519)(?:.*)?         # SSH keys (and .pub: same family)
      | \.npmrc | \.pypirc | \.netrc | \.htpasswd | \.pgpass | \.git-credentials
      | credentials?(?:[._-].*)?                   # credentials.json, credential-store
      | secrets?(?:[._-].*)?                       # secrets.yaml, secret.txt
    )$""",
    re.IGNORECASE | re.VERBOSE,
)
_SENSITIVE_DIRS: Final = frozenset({".git", ".ssh", ".aws", ".gnupg", ".kube", ".docker"})
_MIGRATION_DIRS: Final = frozenset({"migrations", "migrate", "migration"})


def _parts(path: str) -> list[str]:
    return [p for p in posixpath.normpath(path).split("/") if p not in ("", ".")]


def is_sensitive(path: str) -> bool:
    """Whether a workspace path names something that likely holds secrets or repo internals."""
    parts = _parts(path)
    if not parts:
        return False
    if any(part.lower() in _SENSITIVE_DIRS for part in parts[:-1]):
        return True
    return parts[-1].lower() in _SENSITIVE_DIRS or bool(_SENSITIVE_NAME.match(parts[-1]))


def has_pending_migrations(changed_paths: Iterable[str]) -> bool:
    """The module docstring's heuristic over the working tree's changed and new paths."""
    for path in changed_paths:
        parts = [p.lower() for p in _parts(path)]
        directories = parts[:-1]
        if any(part in _MIGRATION_DIRS for part in directories):
            return True
        if any(a == "alembic" and b == "versions" for a, b in itertools.pairwise(directories)):
            return True
    return False


@record
class FileFacts:
    """What is known about one file in play (``FileMeta`` on the wire).

    Attributes:
        path: workspace-relative POSIX.
        bytes_before: its size at HEAD (None: new, or unknown).
        bytes_after: its size now / as proposed (None: deleted, or unknown).
        created: it did not exist before.
        deleted: it is (to be) deleted.
    """

    path: str
    bytes_before: int | None = None
    bytes_after: int | None = None
    created: bool = False
    deleted: bool = False


@record
class AvailableModel:
    """A model as ``workflow_select@1`` shows it. None means unknown (sent as null: a made-up
    number would mislead the judge)."""

    id: str
    context_tokens: int | None
    latency_ms: int | None
    cost_tier: Literal["low", "medium", "high"]
    locality: Literal["local", "remote"] | None = None

    def to_wire(self) -> dict[str, Any]:
        wire: dict[str, Any] = {
            "id": self.id,
            "contextTokens": self.context_tokens,
            "latencyMs": self.latency_ms,
            "costTier": self.cost_tier,
        }
        if self.locality is not None:
            wire["locality"] = self.locality
        return wire


class ModelLike(Protocol):
    """What :func:`available_models` reads of a catalog entry (``models.ModelInfo`` fits)."""

    @property
    def id(self) -> str: ...
    @property
    def context_tokens(self) -> int | None: ...
    @property
    def cost_tier(self) -> Literal["low", "medium", "high"] | None: ...
    @property
    def locality(self) -> Literal["local", "remote"]: ...


def available_models(
    models: Iterable[ModelLike], latencies: Mapping[str, int] | None = None
) -> list[AvailableModel]:
    """The judge's view of catalog entries.

    ``costTier`` is required by the seed: an entry without one counts as ``low`` when local
    (no per-token price) and ``medium`` otherwise — the middle, so that an unknown price neither
    attracts nor repels the judge. ``latencyMs`` is the last measured one (``models.test``), or
    null.
    """
    measured = latencies or {}
    return [
        AvailableModel(
            id=m.id,
            context_tokens=m.context_tokens,
            latency_ms=measured.get(m.id),
            cost_tier=m.cost_tier or ("low" if m.locality == "local" else "medium"),
            locality=m.locality,
        )
        for m in models
    ]


def cap_command(command: str) -> str:
    """`command` cut to :data:`MAX_COMMAND_CHARS` characters (the last one ``…`` when cut)."""
    if len(command) <= MAX_COMMAND_CHARS:
        return command
    return command[: MAX_COMMAND_CHARS - 1] + "…"


def cap_files(
    items: Sequence[T], path_of: Callable[[T], str], sensitive: Callable[[str], bool]
) -> tuple[list[T], int]:
    """Deduplicate by path, keep at most :data:`MAX_FILES` (sensitive ones first when cutting).

    Returns:
        The kept items and how many were cut.
    """
    unique: dict[str, T] = {}
    for item in items:
        unique.setdefault(path_of(item), item)
    kept = list(unique.values())
    if len(kept) <= MAX_FILES:
        return kept, 0
    flagged = [item for item in kept if sensitive(path_of(item))]
    others = [item for item in kept if not sensitive(path_of(item))]
    chosen = (flagged + others)[:MAX_FILES]
    return chosen, len(kept) - len(chosen)


def _file_meta(facts: FileFacts, sensitive: bool) -> dict[str, Any]:
    meta: dict[str, Any] = {"path": facts.path, "sensitive": sensitive}
    if facts.bytes_before is not None:
        meta["bytesBefore"] = facts.bytes_before
    if facts.bytes_after is not None:
        meta["bytesAfter"] = facts.bytes_after
    if facts.created:
        meta["created"] = True
    if facts.deleted:
        meta["deleted"] = True
    return meta


def build_workflow_select(
    *,
    task_type: str,
    files: Sequence[FileFacts],
    estimated_diff_size: int,
    last_run_status: LastRunStatus,
    user_preference: str | None,
    available_models: Sequence[AvailableModel],
    sensitive: Callable[[str], bool] = is_sensitive,
) -> dict[str, Any]:
    """The ``workflow_select@1`` state.

    Args:
        task_type: the task's kind (``ask | edit | fix``).
        files: the files in play, in order (the task's context files, then the diff's).
        estimated_diff_size: changed lines (added + deleted).
        last_run_status: how the workspace's previous task ended.
        user_preference: the task's ``preference``; :data:`DEFAULT_PREFERENCE` when None.
        available_models: what the workflows may use.
        sensitive: the sensitive-path rule.
    """
    kept, cut = cap_files(files, lambda f: f.path, sensitive)
    state: dict[str, Any] = {
        "taskType": task_type,
        "filesTouched": [_file_meta(f, sensitive(f.path)) for f in kept],
        "estimatedDiffSize": max(0, estimated_diff_size),
        "lastRunStatus": last_run_status,
        "userPreference": user_preference or DEFAULT_PREFERENCE,
        "availableModels": [m.to_wire() for m in available_models],
    }
    if cut:
        state["truncatedCount"] = cut
    return state


def build_risk_gate(
    *,
    action_type: str,
    paths: Sequence[str],
    branch: str,
    env: str,
    has_pending_migrations: bool,
    command: str | None = None,
    edit_file_count: int | None = None,
    sensitive: Callable[[str], bool] = is_sensitive,
) -> dict[str, Any]:
    """The ``risk_gate@1`` state of one call.

    Args:
        action_type: the Desiide tool called (``run_command``, ``propose_edit``, …).
        paths: the workspace paths the call touches.
        branch: the git branch (see :mod:`.gather`).
        env: ``local`` or ``ci``.
        has_pending_migrations: :func:`has_pending_migrations` of the working tree.
        command: ``run_command``'s command line (cut to 500 characters).
        edit_file_count: ``propose_edit``'s number of files.
        sensitive: the sensitive-path rule.
    """
    kept, cut = cap_files(paths, lambda p: p, sensitive)
    state: dict[str, Any] = {"actionType": action_type}
    if command is not None:
        state["command"] = cap_command(command)
    if edit_file_count is not None:
        state["editFileCount"] = max(0, edit_file_count)
    state["context"] = {
        "branch": branch,
        "env": env,
        "hasPendingMigrations": has_pending_migrations,
    }
    state["filesTouched"] = [{"path": p, "sensitive": sensitive(p)} for p in kept]
    if cut:
        state["truncatedCount"] = cut
    return state


def build_cost_route(
    *,
    task_type: str,
    files_touched_count: int,
    project_size_lines: int,
    user_cost_bias: str | None,
    recent_failures: int,
) -> dict[str, Any]:
    """The ``cost_route@1`` state (counts only; nothing to cap)."""
    return {
        "taskType": task_type,
        "filesTouchedCount": max(0, files_touched_count),
        "projectSizeLines": max(0, project_size_lines),
        "userCostBias": user_cost_bias or DEFAULT_PREFERENCE,
        "recentFailures": max(0, recent_failures),
    }
