"""Tests of the session host package (bridge/host)."""
