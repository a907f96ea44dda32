"""The store's fixtures (``home``, ``db``, ``umask``) for the integration tier too."""

from tests.store.conftest import db, home, umask

__all__ = ["db", "home", "umask"]
