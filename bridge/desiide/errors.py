"""The Desiide protocol's error codes and the exception handlers raise to answer with one.

The seed fixes six application codes (-32001…-32006); the five JSON-RPC 2.0 codes come from the
control socket's `bridge.control.rpc`, which this protocol shares its framing and parsing with, so
a code means the same thing on both sockets.

A handler that cannot do what it was asked raises `DesiideError`; the runtime turns it into the
error answer with `DesiideConnection.error_for`. Its message goes to the editor verbatim, so it
must be written for the user and must never hold a secret or an exception's text (anything
unexpected is answered ``-32603`` with the details in the log only).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final

from bridge.control.rpc import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    NOT_INITIALIZED,
    PARSE_ERROR,
    PROTOCOL_MISMATCH,
)

__all__ = [
    "APPROVAL_NOT_FOUND",
    "ERROR_NAMES",
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "METHOD_NOT_FOUND",
    "NOT_IMPLEMENTED",
    "NOT_INITIALIZED",
    "PARSE_ERROR",
    "PROTOCOL_MISMATCH",
    "SECRET_MISSING",
    "TASK_NOT_FOUND",
    "DesiideError",
]

NOT_IMPLEMENTED: Final = -32003
"""A method of the protocol that this orchestrator has not registered a handler for."""
TASK_NOT_FOUND: Final = -32004
"""``taskId`` names no task this orchestrator knows."""
APPROVAL_NOT_FOUND: Final = -32005
"""``approvalId`` (or ``proposalId``) names nothing pending on that task: never raised, or already
answered — from the editor or from a phone, whichever came first."""
SECRET_MISSING: Final = -32006
"""A ``secret:<name>`` ref that the extension's SecretStorage does not hold (``secrets.get`` gave
``null``), so the model or endpoint needing it cannot be used."""

ERROR_NAMES: Final[Mapping[int, str]] = MappingProxyType(
    {
        PARSE_ERROR: "ParseError",
        INVALID_REQUEST: "InvalidRequest",
        METHOD_NOT_FOUND: "MethodNotFound",
        INVALID_PARAMS: "InvalidParams",
        INTERNAL_ERROR: "InternalError",
        PROTOCOL_MISMATCH: "ProtocolMismatch",
        NOT_INITIALIZED: "NotInitialized",
        NOT_IMPLEMENTED: "NotImplemented",
        TASK_NOT_FOUND: "TaskNotFound",
        APPROVAL_NOT_FOUND: "ApprovalNotFound",
        SECRET_MISSING: "SecretMissing",
    }
)
"""Every code this protocol answers with, and the name the seed and ``DESIIDE.md`` give it."""


class DesiideError(Exception):
    """An error to answer a request with.

    Args:
        code: one of `ERROR_NAMES` (the application codes, or ``INVALID_PARAMS`` for a request
            that is well formed but refers to something impossible, e.g. a path outside a
            proposal).
        message: the user-facing text; never a secret, never an exception's text.
        data: optional JSON-able details for the extension (``error.data`` on the wire).

    Attributes:
        code, message, data: as given.
    """

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def __repr__(self) -> str:
        name = ERROR_NAMES.get(self.code, str(self.code))
        return f"DesiideError({name}, {self.message!r})"
