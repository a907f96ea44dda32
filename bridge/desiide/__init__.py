"""The Desiide orchestrator: an editor extension's agent tasks, served as bridge sessions.

``codedeck-bridge desiide`` speaks the Desiide extension↔orchestrator protocol (JSON-RPC 2.0 over
stdio, ``Content-Length`` frames; see ``DESIIDE.md``) and runs each task as a daemon session, so a
paired phone sees and can approve the same work.

The pure layers live here side by side: `errors` (the wire error codes), `paths` (the
workspace-relative path rule), `schema` (pydantic models of every message) and `connection` (the
sans-I/O server connection). This package module imports none of them, so that importing a
single submodule stays cheap.
"""

from __future__ import annotations

__all__: list[str] = []
