"""End-to-end tests of real ACP agents (OpenCode, Gemini CLI) against local mock model APIs."""
