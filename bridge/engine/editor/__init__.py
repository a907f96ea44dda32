"""The editor's tasks (``codedeck-bridge desiide`` over the control socket), as engine effects.

``tasks`` turns the editor's commands into effects; ``task_gate`` puts a task's policy in front of
the permission gate.
"""

__all__: list[str] = []
