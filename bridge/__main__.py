"""``python -m bridge`` is the ``codedeck-bridge`` command."""

import sys

from bridge.cli import main

sys.exit(main())
