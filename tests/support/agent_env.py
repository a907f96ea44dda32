"""What every isolated agent environment shares: the few host variables it keeps, the mock's URL.

The environment builders (:func:`tests.support.opencode_env.opencode_env`,
:func:`tests.support.mock_gemini.gemini_env`) return a *whole* environment rather than a delta to
merge into ``os.environ``: the ACP SDK passes only HOME, LOGNAME, PATH, SHELL, TERM and USER when
given nothing, and merging the caller's environment would leak its ``ANTHROPIC_*``,
``OPENCODE_*`` or ``GEMINI_*`` variables (a developer's real keys, CI's settings) into the agent.
So each starts from :func:`base_env`: the host's PATH (node, the shell tools the agents run),
locale and temp dir, and nothing else.
"""

from __future__ import annotations

import os
from typing import Protocol

__all__ = ["PASSTHROUGH", "HasBaseUrl", "base_env", "base_url_of"]

PASSTHROUGH = ("PATH", "LANG", "LC_ALL", "TZ", "TMPDIR", "SHELL")
"""Host variables an isolated agent keeps."""


class HasBaseUrl(Protocol):
    """A mock server (:class:`~tests.support.mock_anthropic.MockAnthropic`, …)."""

    @property
    def base_url(self) -> str: ...


def base_url_of(server: str | HasBaseUrl) -> str:
    """`server` itself if it is a URL, else its ``base_url``."""
    return server if isinstance(server, str) else server.base_url


def base_env() -> dict[str, str]:
    """The :data:`PASSTHROUGH` variables of this process (PATH defaults to ``os.defpath``)."""
    env = {name: os.environ[name] for name in PASSTHROUGH if name in os.environ}
    env.setdefault("PATH", os.defpath)
    env["NO_COLOR"] = "1"
    return env
