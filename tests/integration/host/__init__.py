"""Integration tests: the session host."""
