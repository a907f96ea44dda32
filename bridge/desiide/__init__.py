"""The Desiide orchestrator: an editor extension's agent tasks, served as bridge sessions.

``codedeck-bridge desiide`` speaks the Desiide extension↔orchestrator protocol (JSON-RPC 2.0 over
stdio, ``Content-Length`` frames; see ``DESIIDE.md``) and runs each task as a daemon session, so a
paired phone sees and can approve the same work.

At the top, the process: ``server`` (the stdio edge and the method table), ``connection`` (the
sans-I/O server connection, on the JSON-RPC core of :mod:`bridge.control.endpoint`),
``handlers`` (each request → the module that does it), ``orchestrator`` (the task book, the
daemon link and the watch, wired), ``daemon_link``, ``settings`` (the validated settings
snapshot), ``errors``, ``paths`` (the workspace path rule), ``budgets``, ``decision_log``.

The areas: :mod:`~bridge.desiide.schema` (pydantic models of every message),
:mod:`~bridge.desiide.lifecycle` (the task state machine), :mod:`~bridge.desiide.models` (the
models the editor can pick), :mod:`~bridge.desiide.checks` (a task's success checks),
:mod:`~bridge.desiide.jev` (the judge model's packs). This package module imports none of them, so
that importing a single submodule stays cheap.
"""

from __future__ import annotations

__all__: list[str] = []
