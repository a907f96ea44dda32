"""The agent sandbox: what an agent may see and write, and the bubblewrap command that enforces it."""

from .hidden import HOME_SECRETS, expand_user, hidden_paths, is_hidden

__all__ = ["HOME_SECRETS", "expand_user", "hidden_paths", "is_hidden"]
