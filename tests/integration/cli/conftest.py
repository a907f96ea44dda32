"""The CLI fixtures (``home``, ``handler``, ``daemon``, ``hosts``) for the integration tier too.

The CLI's in-process tests and the ones that run it as a process share one fake daemon: a control
server on a temporary home (``daemon`` here is that server, not the real daemon process of
tests/integration/conftest.py).
"""

from tests.cli.conftest import daemon, handler, home, hosts

__all__ = ["daemon", "handler", "home", "hosts"]
