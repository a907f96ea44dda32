"""The browser tier: CodeDeck Web in Debian's Chromium against the real bridge."""
