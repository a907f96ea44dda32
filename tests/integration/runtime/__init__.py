"""Integration tests: runtime."""
