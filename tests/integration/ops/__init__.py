"""Integration tests: ops."""
