"""What a workspace tool returns, how it fails, and how its arguments are read.

A tool call ends in a :class:`ToolResult`: the text the model reads, and whether it is an error.
An error is not an exception that escapes: the model must be able to act on it, so its text starts
with a short kind (``path_refused: …``, ``ripgrep_missing: …``) and says what to do instead. The
tools raise :class:`ToolError` for that; :class:`~.tools.WorkspaceTools` turns it into the result.

The arguments come from the model (through the agent, and for ``propose_edit`` the editor's
``report`` through the bridge): untrusted JSON. They are read once, strictly, by the helpers here
(:func:`check_keys`, :func:`text_arg`, :func:`int_arg`, :func:`bool_arg`): a wrong type or an
unknown name is an ``invalid_arguments`` error naming the argument, never a guess.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Final

from bridge.records import record

__all__ = [
    "INVALID_ARGUMENTS",
    "ToolError",
    "ToolResult",
    "bool_arg",
    "check_keys",
    "int_arg",
    "text_arg",
]

INVALID_ARGUMENTS: Final = "invalid_arguments"


@record
class ToolResult:
    """The outcome of one tool call.

    Attributes:
        text: what the model reads.
        is_error: the call failed (MCP's ``isError``).
    """

    text: str
    is_error: bool = False


class ToolError(Exception):
    """A tool call that cannot be done; the model reads ``"<kind>: <message>"``.

    Args:
        kind: a short machine-readable word (``path_refused``, ``not_found``, …).
        message: what went wrong and what to do instead (no secrets, no host paths outside the
            workspace).
    """

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message

    def result(self) -> ToolResult:
        """This error as the call's result."""
        return ToolResult(f"{self.kind}: {self.message}", is_error=True)


def check_keys(arguments: Mapping[str, object], known: Collection[str]) -> None:
    """Refuse names outside `known` (a typo must not be silently ignored).

    Raises:
        ToolError: an unknown argument.
    """
    unknown = sorted(str(name) for name in arguments if name not in known)
    if unknown:
        raise ToolError(
            INVALID_ARGUMENTS,
            f"unknown argument {unknown[0]!r}; the arguments are: {', '.join(sorted(known))}",
        )


def text_arg(
    arguments: Mapping[str, object],
    name: str,
    *,
    default: str | None = None,
    path: bool = False,
) -> str | None:
    """A string argument (`default` when absent or null).

    Args:
        path: it is a path: a NUL is left for the path rule to refuse (``path_refused``).

    Raises:
        ToolError: not a string, or it holds a NUL character.
    """
    value = arguments.get(name)
    if value is None:
        return default
    if not isinstance(value, str):
        raise ToolError(INVALID_ARGUMENTS, f"{name!r} must be a string")
    if not path and "\x00" in value:
        raise ToolError(INVALID_ARGUMENTS, f"{name!r} must not contain a NUL character")
    return value


def int_arg(
    arguments: Mapping[str, object], name: str, *, low: int, high: int | None = None
) -> int | None:
    """An integer argument in ``[low, high]`` (None when absent or null).

    Raises:
        ToolError: not an integer (a boolean is not one), or out of range.
    """
    value = arguments.get(name)
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)  # JSON has one number type: 5.0 is 5
    if isinstance(value, bool) or not isinstance(value, int):
        raise ToolError(INVALID_ARGUMENTS, f"{name!r} must be an integer")
    if value < low or (high is not None and value > high):
        bound = f"between {low} and {high}" if high is not None else f"at least {low}"
        raise ToolError(INVALID_ARGUMENTS, f"{name!r} must be {bound} (got {value})")
    return value


def bool_arg(arguments: Mapping[str, object], name: str, *, default: bool) -> bool:
    """A boolean argument (`default` when absent or null).

    Raises:
        ToolError: not a boolean.
    """
    value = arguments.get(name)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise ToolError(INVALID_ARGUMENTS, f"{name!r} must be true or false")
    return value
