"""The daemon's side of the session hosts: each session's agent runs in a host process that outlives the daemon.

``runners`` starts, feeds, steers and stops a session's runner under one per-session lock;
``host_runner`` is that runner for every agent kind, through the session's host; ``launcher``
starts, finds and stops host processes; ``link`` is the daemon's end of a host's socket;
``records`` turns what a host reports into the engine's records; ``agent_env`` is what the agents
run with (environment, sandbox plan, the gate in front of every tool call); ``agent_probe`` checks
that a configured ACP agent starts.
"""

__all__: list[str] = []
