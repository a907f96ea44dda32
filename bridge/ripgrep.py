"""Where ripgrep (``rg``) is: the editor tools ``list_files`` and ``search`` run it.

Looked up on ``PATH`` first, then beside the running Python (``pip install ripgrep`` puts the
binary in the same ``bin`` directory as the interpreter of the environment, which is often not
on ``PATH`` when the bridge runs from a virtual environment or under systemd). A leaf module: the
session host (lean) and the orchestrator both use it.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

__all__ = ["find_ripgrep"]


def find_ripgrep(path: str | None = None) -> str | None:
    """The ``rg`` executable to run, or None when there is none.

    Args:
        path: the ``PATH`` to search (None: this process's).
    """
    return shutil.which("rg", path=path) or shutil.which(
        "rg", path=str(Path(sys.executable).parent)
    )
