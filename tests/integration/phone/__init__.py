"""Integration tests: phone."""
