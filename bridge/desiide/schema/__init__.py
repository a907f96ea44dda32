"""The Desiide protocol's schema, as pydantic models.

``methods`` holds every request's params and result and the method tables; ``base`` the two model
bases and the shared vocabularies; ``task`` tasks and their records; ``events`` the
orchestrator's notifications; ``config`` the extension's settings snapshot; ``jev`` the JEV packs
on the wire.
"""

__all__: list[str] = []
