"""The ``[sandbox]`` table of config.toml, parsed and checked (pure).

.. code-block:: toml

    [sandbox]
    enabled = true            # run every agent under bubblewrap (false: unconfined, warned)
    required = false          # true: a session fails rather than run unconfined
    hide = ["~/work/.env"]    # more paths agents never see
    unhide = ["~/.config/gh"] # well-known secrets to show them (never the bridge's own)
    writable = ["~/.pub-cache"]  # more paths agents may write
    bwrap = "/usr/bin/bwrap"  # the program (default: bwrap on PATH)

Every error names the setting, the file, and the fix.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from bridge.records import record

__all__ = ["SANDBOX_KEYS", "SandboxConfigError", "SandboxSettings", "parse_sandbox"]

SANDBOX_KEYS: Final = ("enabled", "required", "hide", "unhide", "writable", "bwrap")


class SandboxConfigError(ValueError):
    """``[sandbox]`` is invalid; the message names the setting, the file and the fix."""


@record
class SandboxSettings:
    """The ``[sandbox]`` table (see the module docstring)."""

    enabled: bool = True
    required: bool = False
    hide: tuple[str, ...] = ()
    unhide: tuple[str, ...] = ()
    writable: tuple[str, ...] = ()
    bwrap: str | None = None


def parse_sandbox(raw: object, *, source: str) -> SandboxSettings:
    """The settings of a ``[sandbox]`` table (None: the defaults).

    Args:
        raw: the table as TOML gave it.
        source: the file it came from (for messages).

    Raises:
        SandboxConfigError: an unknown key or a value of the wrong type.
    """
    if raw is None:
        return SandboxSettings()
    if not isinstance(raw, Mapping):
        raise SandboxConfigError(
            f"sandbox (file {source}): expected a table [sandbox] with keys "
            f"{', '.join(SANDBOX_KEYS)}"
        )
    unknown = sorted(set(raw) - set(SANDBOX_KEYS))
    if unknown:
        raise SandboxConfigError(
            f"sandbox (file {source}): unknown setting(s) {', '.join(unknown)}; "
            f"known settings are {', '.join(SANDBOX_KEYS)}"
        )
    bwrap = raw.get("bwrap")
    if bwrap is not None and (not isinstance(bwrap, str) or not bwrap.startswith("/")):
        raise SandboxConfigError(
            f"sandbox.bwrap (file {source}): expected the absolute path of the bubblewrap "
            "program (for example /usr/bin/bwrap), or remove it to use bwrap on PATH"
        )
    return SandboxSettings(
        enabled=_flag(raw, "enabled", True, source),
        required=_flag(raw, "required", False, source),
        hide=_paths(raw, "hide", source),
        unhide=_paths(raw, "unhide", source),
        writable=_paths(raw, "writable", source),
        bwrap=bwrap,
    )


def _flag(raw: Mapping[str, Any], name: str, default: bool, source: str) -> bool:
    value = raw.get(name, default)
    if not isinstance(value, bool):
        raise SandboxConfigError(
            f"sandbox.{name} (file {source}): expected true or false, not {value!r}"
        )
    return value


def _paths(raw: Mapping[str, Any], name: str, source: str) -> tuple[str, ...]:
    value = raw.get(name, [])
    if not isinstance(value, list) or not all(
        isinstance(item, str) and item.strip() and "\0" not in item for item in value
    ):
        raise SandboxConfigError(
            f"sandbox.{name} (file {source}): expected a list of paths "
            '(absolute or starting with ~/, for example ["~/.config/gh"])'
        )
    bad = [item for item in value if not (item.startswith("/") or item.startswith("~"))]
    if bad:
        raise SandboxConfigError(
            f"sandbox.{name} (file {source}): {bad[0]!r} is relative; "
            "write it absolute or starting with ~/"
        )
    return tuple(item.strip() for item in value)
