"""The daemon's runtime: the asyncio edges around the pure engine, in three areas around a spine.

Only this package (and the CLI's offline commands) performs I/O for the bridge; the engine, the
gate, the protocol and the Nostr primitives it drives stay pure.

The data path of one phone ``input``, in order, all in the spine:

1. ``daemon``       the relay pool's verified event becomes a ``CommandEventReceived`` input;
2. ``engine_loop``  ``feed`` queues it; the loop calls ``Engine.handle`` and performs the effects
                    in the order returned;
3. ``commit``       the ``Commit`` is one transaction: processed mark, cursor, transcript line,
                    inbox row and the ``input-ack`` in the outbox;
4. ``outbound``     once durable, the ack and the live line are sealed (NIP-44, signed) and sent
                    to every relay;
5. ``hosts.runners`` ``SendToRunner`` hands the inbox row to the session's agent, marked ``sent``
                    in the store before the agent gets it.

The spine, one job per module: ``daemon`` (assembly, start and shutdown order, signals),
``engine_loop`` (the queue and the effects), ``commit``, ``outbound``, ``sync_chunks`` (transcript
sync read in batches), ``subscriptions`` (the relay filters), ``boot`` (the durable state the
engine is rebuilt from), ``identity`` (where the key comes from), ``clock`` (wall time for the
protocol, monotonic for timers), ``periodic`` (supervised timers), ``progress`` (a signal that the
loop moved on).

The areas: :mod:`~bridge.runtime.hosts` (session hosts and the agents in them),
:mod:`~bridge.runtime.errands` (slow work the engine asks for and hears back about),
:mod:`~bridge.runtime.edges` (control socket, embedded relay, systemd, the relay's admin API,
suspend). Every background task is spawned through :class:`bridge.tasks.TaskSet`.
"""

__all__: list[str] = []
