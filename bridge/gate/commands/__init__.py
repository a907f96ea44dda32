"""What each command does to the disk and the network, as the gate models it.

``command_rules`` dispatches a parsed command to its rule; ``rules`` and ``command_options`` hold
the per-program tables; ``long_options`` the options that take a value; ``wrappers`` the programs
that run another program; ``deferred`` code stored now and run later; ``hooks`` the files a tool
runs on its own; ``interpreters``, ``git`` and ``sed_script`` the programs with a language of
their own.
"""

__all__: list[str] = []
