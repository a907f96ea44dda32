"""Who is on the other end of a unix socket: only our own user (or root) may drive us.

Both local sockets of the bridge — the daemon's control socket and each session host's socket —
live in 0700 directories with mode 0600, which is the first guard; this is the second, checked on
every connection from the kernel's ``SO_PEERCRED``. A leaf module, so that a session host can use
it without the daemon's stack.
"""

from __future__ import annotations

import asyncio
import os
import socket
import struct

__all__ = ["peer_allowed"]


def peer_allowed(writer: asyncio.StreamWriter) -> bool:
    """Whether the peer of `writer`'s socket runs as our uid (or root).

    Where ``SO_PEERCRED`` does not exist (not Linux) the file mode is the only guard: True.
    """
    sock = writer.get_extra_info("socket")
    option = getattr(socket, "SO_PEERCRED", None)
    if sock is None or option is None:
        return True
    try:
        raw = sock.getsockopt(socket.SOL_SOCKET, option, struct.calcsize("3i"))
    except OSError:
        return False
    _pid, uid, _gid = struct.unpack("3i", raw)
    return uid in (os.geteuid(), 0)
