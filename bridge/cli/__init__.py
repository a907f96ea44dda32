"""The ``codedeck-bridge`` command line: the parser and each command, on the CLI's side of the control socket.

``main`` builds the parser and runs the offline commands (``run``, ``keys``, ``decisions`` …);
``commands`` the commands that ask a running daemon over the control socket (``status``, ``pair``,
``phones``, ``unpair``, ``sessions``); ``render`` the text they print; ``pair_advice`` what
``pair`` says when no phone can reach the link's relays.
"""

__all__: list[str] = []
