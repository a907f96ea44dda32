"""``python -m bridge`` and the ``codedeck-bridge`` command (the console script runs
:func:`main` from here too).

The cyclic garbage collector is off while the command's modules load. Importing what
``codedeck-bridge run`` imports makes tens of thousands of objects that live as long as the process
(modules, classes, functions), and the collector, triggered by allocation counts, would walk them
over and over on the way for nothing: none of them is garbage. One collection at the end does the
job once, which shortens the start of every command (the daemon's restart and each
``codedeck-bridge`` the user types). :func:`bridge.cli.main.main` turns the collector back on once
the command's modules are loaded, after freezing what start-up made (``gc.freeze``), so that no
later collection of the daemon scans those objects again.
"""

import gc
import sys

gc.disable()

from bridge.cli.main import main  # noqa: E402  (after the collector is off: module docstring)

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
