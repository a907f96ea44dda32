"""Agent runners: one interface (`base`), the Claude Code runner, and a scripted agent."""

__all__: list[str] = []
