"""CodeDeck Web, the built browser client, as files of this package: where they are and a loader.

The app's sources live in ``web/``; ``npm run build`` there writes the built files into
``static/`` beside this module, and they ship in the Python package, so a bridge installed from
a wheel serves the app with no Node.js on the machine. The embedded relay serves them from its
own port (:mod:`bridge.runtime.edges.embedded_relay` hands them to a
:class:`~bridge.relay.site.StaticSite`); ``deploy/web/`` says how to host them anywhere else.

Only regular files are listed, by their path under ``static/``: no symbolic link is followed, so
the set served is exactly what the build wrote.
"""

from __future__ import annotations

from pathlib import Path

__all__ = [
    "NOT_BUILT",
    "STATIC_DIR",
    "load_files",
]

STATIC_DIR = Path(__file__).resolve().parent / "static"
"""Where the build writes the app (``web/build.mjs``)."""

NOT_BUILT = (
    "CodeDeck Web is not built in this copy of codedeck-bridge.\n"
    "Build it from the repository: cd web && npm ci && npm run build\n"
    "(that writes bridge/webclient/static/), then restart the bridge.\n"
    "This port is also a Nostr relay: the CodeDeck app connects to it with a websocket.\n"
)
"""What ``/`` says when there are no files to serve."""


def load_files(directory: Path = STATIC_DIR) -> dict[str, bytes]:
    """Every regular file under ``directory``, by site path (``/app.js``, ``/icons/192.png``).

    Hidden files (a name starting with ``.``) are left out. A missing folder gives no files.

    Raises:
        OSError: a file could not be read.
    """
    if not directory.is_dir():
        return {}
    files: dict[str, bytes] = {}
    for path in sorted(directory.rglob("*")):
        relative = path.relative_to(directory)
        if any(part.startswith(".") for part in relative.parts):
            continue
        if path.is_symlink() or not path.is_file():
            continue
        if any(parent.is_symlink() for parent in path.parents if directory in parent.parents):
            continue
        files["/" + relative.as_posix()] = path.read_bytes()
    return files
