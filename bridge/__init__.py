"""codedeck-bridge: drive Claude Code sessions from the CodeDeck phone app over Nostr (protocol v10)."""

__all__ = ["__version__"]

__version__ = "0.1.0"
