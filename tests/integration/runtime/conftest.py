"""The runtime's ``db`` fixture (a fresh bridge database) for the integration tier too."""

from tests.runtime.conftest import db

__all__ = ["db"]
