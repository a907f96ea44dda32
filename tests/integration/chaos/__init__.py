"""Integration tests: chaos."""
