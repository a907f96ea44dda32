"""Slow work the engine asks for and hears back about, off the engine loop.

``dispatch`` runs each errand and turns its outcome into an input; the rest are the errands:
``workspace`` (the roots sessions may run in, the folders offered to the phone), ``images`` and
``blossom`` (uploaded and downloaded images), ``probes`` (token and key checks), ``gsd`` (the GSD
planning state of a project), ``git_commits`` (did a commit land in a session's repository).
"""

__all__: list[str] = []
