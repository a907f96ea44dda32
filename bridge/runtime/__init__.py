"""The asyncio wiring of the daemon: relays, store, engine and agent runners.

Only this package (and the CLI's offline commands) performs I/O for the bridge; the engine,
protocol and Nostr primitives it drives stay pure.
"""

__all__: list[str] = []
