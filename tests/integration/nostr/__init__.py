"""Integration tests: nostr."""
