"""The seam between the ACP SDK and the driver: the client object the SDK calls, and the SDK's
models as the wire's JSON.

The SDK dispatches each message the agent sends to a *client* object; :class:`SdkClient` hands
``session/update`` and ``session/request_permission`` to a :class:`Handler` (the driver) as JSON
objects, the camelCase shapes of the protocol (:func:`to_json`), so that everything after this
seam reads every agent's variants the same way and can be tested with plain dicts. Other client
methods (``fs/*``, ``terminal/*``) are not offered: the client capabilities say so, and an agent
that calls one anyway (OpenCode writes through ``fs/write_text_file`` after its own write) gets
"method not found" — no path around the permission gate.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import acp
from acp import schema

__all__ = ["Handler", "SdkClient", "error_text", "to_json"]


class Handler(Protocol):
    """What the driver does with what the agent sends."""

    def on_update(self, session_id: str, update: Mapping[str, Any]) -> None: ...

    async def on_permission(
        self, session_id: str, tool_call: Mapping[str, Any], options: list[Mapping[str, Any]]
    ) -> str | None:
        """The chosen option id, or None to answer ``cancelled``."""
        ...


class SdkClient:
    """The ACP client side the SDK calls: updates and permission requests go to the driver."""

    def __init__(self, driver: Handler) -> None:
        self._driver = driver

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        # Synchronous on purpose: the SDK starts one task per message in arrival order, and a
        # body without an await keeps that order.
        self._driver.on_update(session_id, to_json(update))

    async def request_permission(
        self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any
    ) -> schema.RequestPermissionResponse:
        option_id = await self._driver.on_permission(
            session_id, to_json(tool_call), [to_json(o) for o in options]
        )
        outcome: schema.AllowedOutcome | schema.DeniedOutcome
        if option_id is None:
            outcome = schema.DeniedOutcome(outcome="cancelled")
        else:
            outcome = schema.AllowedOutcome(outcome="selected", option_id=option_id)
        return schema.RequestPermissionResponse(outcome=outcome)


def to_json(value: Any) -> dict[str, Any]:
    """An SDK model (or a plain dict) as the wire's JSON object."""
    if isinstance(value, Mapping):
        return dict(value)
    dump = getattr(value, "model_dump", None)
    if dump is None:
        return {}
    dumped = dump(mode="json", by_alias=True, exclude_none=True)
    return dumped if isinstance(dumped, dict) else {}


def error_text(exc: acp.RequestError) -> str:
    data = getattr(exc, "data", None)
    details = data.get("details") if isinstance(data, Mapping) else None
    text = str(details or exc) or type(exc).__name__
    return text[:500]
