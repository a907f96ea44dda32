"""The operations fixtures (``cli``, ``notify_socket``) for the integration tier too."""

from tests.ops.conftest import cli, notify_socket

__all__ = ["cli", "notify_socket"]
