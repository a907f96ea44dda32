"""A task's success checks (``success.testsPass`` / ``lintClean``).

``commands`` finds the project's test and lint commands; ``runner`` runs them in the workspace.
"""

__all__: list[str] = []
