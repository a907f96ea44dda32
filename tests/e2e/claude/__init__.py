"""End-to-end tests of the Claude Code runner on the real bundled CLI."""
