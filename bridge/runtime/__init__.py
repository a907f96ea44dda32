"""The asyncio wiring of the daemon: relays, store, engine and agent runners.

Only this package (and the CLI's offline commands) performs I/O for the bridge; the engine,
protocol and Nostr primitives it drives stay pure.

One phone ``input`` crosses four files, in this order:

``daemon.py``        assembly: the relay pool's events become ``CommandEventReceived`` inputs
``engine_loop.py``   the queue: ``feed`` → ``Engine.handle`` → each effect, in order, to its part
``commit.py``        the transaction: processed marks, cursor, inbox, transcript and outbox rows
``outbound.py``      the reply: encrypted to the phone (NIP-44), signed, published to each relay

Around them, one job per module: ``clock`` (wall time for ``created_at``, monotonic for deadlines),
``boot`` (the durable state the engine is rebuilt from), ``subscriptions`` (the relay filters),
``runners`` and ``agent_env`` (agent sessions, their environment and the PreToolUse check),
``agent_probe`` (whether each configured ACP agent starts, and the models it offers),
``host_runner`` with ``host_link``, ``host_launcher`` and ``host_records`` (each session's agent
runs in a session host that outlives the daemon: adopting, spawning, following its journal),
``errands`` (folder scans, model lists, uploads), ``control_handler`` (the local socket's
methods), ``periodic`` (supervised timers), ``sdnotify`` (systemd readiness, status, watchdog),
``embedded_relay`` (the built-in relay, :mod:`bridge.relay`, on its own thread, and the registry
its policy asks), ``wake`` (a suspend noticed on the clocks: reconnect at once), ``registration`` (the private
relay's admin API), ``git_commits`` (commit notices of a session's repository). Every background
task is spawned through :class:`bridge.tasks.TaskSet`.
"""

__all__: list[str] = []
