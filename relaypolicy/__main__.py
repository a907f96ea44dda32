"""``python -m relaypolicy`` = the ``codedeck-relaypolicy`` command (before the package is installed)."""

from __future__ import annotations

import sys

from relaypolicy.cli import main

__all__: list[str] = []

if __name__ == "__main__":
    sys.exit(main())
