"""Integration tests: relaypolicy."""
