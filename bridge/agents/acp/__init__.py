"""Agents over the Agent Client Protocol (OpenCode, Gemini CLI, any ACP agent) in a session host.

What the host uses: :func:`acp_driver_factory` (its :class:`~bridge.host.driver.DriverFactory`
for the agent kind ``acp``). One job per module: :mod:`.driver` (one agent's lifetime over the
official SDK), :mod:`.updates` (``session/update`` → transcript entries), :mod:`.tools` (a tool
call in the gate's vocabulary; the option that carries an answer), :mod:`.session_state` (the
session's models and modes; what a replayed history says was received), :mod:`.profiles`
(what differs between agents) and :mod:`.sdk_client` (the seam with the SDK).
"""

from .driver import RECORD_DIR_OPTION, START_TIMEOUT, AcpDriver, acp_driver_factory

__all__ = ["RECORD_DIR_OPTION", "START_TIMEOUT", "AcpDriver", "acp_driver_factory"]
