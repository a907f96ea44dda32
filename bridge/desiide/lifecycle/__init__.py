"""The orchestrator's task lifecycle, as a sans-I/O state machine.

``machine`` drives every task; ``task`` is one task's state and the only code that changes it or
numbers its events; ``types`` the vocabulary (states, kinds, failure reasons, inputs, actions);
``session`` and ``entries`` read what a task's session reports; ``prompts`` the agent's first
prompt and the follow-up after failing checks.
"""

__all__: list[str] = []
