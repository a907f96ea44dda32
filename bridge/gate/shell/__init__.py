"""The gate's model of a shell line: lexer, parser, words, and the check that walks every command."""

__all__: list[str] = []
