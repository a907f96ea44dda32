"""The workspace a task's tools work in, and the one rule for every path a tool is given.

Paths are workspace-relative POSIX paths, as the Desiide protocol has them. :meth:`Workspace.
resolve` is the only way a tool turns a path argument into a file, so the rule is written once:

- refused: an absolute path (``/etc/passwd``), a ``..`` segment anywhere (``a/../../x``: even one
  that would stay inside is refused, the model gets a plain rule it can follow), a NUL;
- normalized: empty and ``.`` segments are dropped (``./src//a.py`` is ``src/a.py``; ``""`` and
  ``"."`` are the root itself);
- refused too: a path that *resolves* outside the root (a symbolic link, at any level, pointing
  out; a dangling one counts by its text). The target is never named in the error.

A path is checked when the call is made; a link swapped in between the check and the read is not
caught (only ``run_command`` could do that, and it is itself a shell in the workspace).
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from .results import ToolError

__all__ = ["PATH_REFUSED", "Workspace"]

PATH_REFUSED: Final = "path_refused"


class Workspace:
    """A workspace root (resolved once: the root itself may be reached through a link).

    Args:
        root: an absolute path to an existing directory.

    Raises:
        ValueError: `root` is relative, missing or not a directory.
    """

    def __init__(self, root: str | Path) -> None:
        given = Path(root)
        if not given.is_absolute():
            raise ValueError(f"the workspace root must be an absolute path (got {str(root)!r})")
        if not given.is_dir():
            raise ValueError(f"the workspace root {str(root)!r} is not a directory")
        self.root: Path = given.resolve()

    def resolve(self, raw: str, *, name: str = "path") -> tuple[str, Path]:
        """Check `raw` (see the module docstring).

        Args:
            raw: the path argument as given.
            name: the argument's name, for the error.

        Returns:
            The normalized relative path (``"."`` for the root) and the resolved absolute path.

        Raises:
            ToolError: ``path_refused``.
        """
        if "\x00" in raw:
            raise ToolError(PATH_REFUSED, f"{name!r} must not contain a NUL character")
        if raw.startswith("/"):
            raise ToolError(
                PATH_REFUSED,
                f"{name!r} {raw!r} is absolute; give a path relative to the workspace root "
                "(e.g. 'src/main.py')",
            )
        parts = [part for part in raw.split("/") if part not in ("", ".")]
        if ".." in parts:
            raise ToolError(
                PATH_REFUSED,
                f"{name!r} {raw!r} has a '..' segment; paths stay inside the workspace and are "
                "written from its root",
            )
        relative = "/".join(parts) or "."
        resolved = (self.root / relative).resolve()
        if not resolved.is_relative_to(self.root):
            raise ToolError(
                PATH_REFUSED, f"{name!r} {relative!r} resolves outside the workspace (a link)"
            )
        return relative, resolved
