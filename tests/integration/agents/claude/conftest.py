"""The Claude driver's fixtures (``fake_cli``, ``start_session``) for the integration tier too."""

from tests.agents.claude.conftest import fake_cli, start_session

__all__ = ["fake_cli", "start_session"]
