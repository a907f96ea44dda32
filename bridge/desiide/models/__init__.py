"""The models the editor can pick: ``models.list`` and ``models.test``.

``listing`` answers both methods; ``http`` makes one timed JSON request and classifies its
failure; ``errors`` is the closed vocabulary of why a model call failed.
"""

__all__: list[str] = []
