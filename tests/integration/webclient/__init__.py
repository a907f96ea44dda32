"""The web client's build checks: what is shipped is what the sources build, and they type-check."""
