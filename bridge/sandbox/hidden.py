"""Which paths an agent must never see: the bridge's own secrets and the user's well-known ones.

One list serves both layers of the security model. The sandbox mounts an empty, read-only
directory (or an empty file) over each of them in the agent's view, and the permission gate denies
any tool call that names one, in every mode. Keeping the list in one pure module is what keeps the
two layers in agreement: a path the gate denies is a path the sandbox hides, and the reverse.

The bridge home and the files the bridge reads secrets from (a key file, a token file, a systemd
credential directory) are always hidden: a user may un-hide a well-known path (``~/.config/gh`` for
an agent that opens pull requests) but never the bridge's own identity. Paths are spelled, not
resolved: a symlinked ``~/.ssh`` is resolved by the caller that does I/O, which hides both spellings.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable, Sequence
from typing import Final

__all__ = ["HOME_SECRETS", "expand_user", "hidden_paths", "is_hidden"]

HOME_SECRETS: Final[tuple[str, ...]] = (
    # keys and agents of remote shells and signatures
    ".ssh",
    ".gnupg",
    # cloud and forge credentials
    ".aws",
    ".azure",
    ".config/gcloud",
    ".config/gh",
    ".config/hub",
    ".config/glab-cli",
    ".netrc",
    ".git-credentials",
    ".config/git/credentials",
    ".docker/config.json",
    ".kube",
    ".vault-token",
    ".terraform.d/credentials.tfrc.json",
    ".pypirc",
    ".npmrc",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".gem/credentials",
    ".m2/settings.xml",
    ".gradle/gradle.properties",
    ".s3cfg",
    ".boto",
    ".oci",
    ".config/rclone",
    ".config/op",
    ".config/sops",
    ".config/hcloud",
    ".config/doctl",
    # password stores and keyrings
    ".password-store",
    ".local/share/keyrings",
    ".gnome2/keyrings",
    ".local/share/kwalletd",
    ".pki",
    # browser profiles (cookies, saved passwords, session tokens)
    ".mozilla",
    ".config/google-chrome",
    ".config/chromium",
    ".config/BraveSoftware",
    ".config/microsoft-edge",
    ".var/app",
)
"""Paths under the user's home that hold credentials, relative to the home."""


def expand_user(path: str, home: str) -> str:
    """`path` with a leading ``~`` or ``~/`` replaced by `home`, made absolute and normalised.

    A relative path is taken relative to the home (the way configuration lists name them).
    """
    if path == "~" or path.startswith("~/"):
        path = home + path[1:]
    elif not path.startswith("/"):
        path = posixpath.join(home, path)
    return posixpath.normpath(path)


def hidden_paths(
    home: str,
    bridge_home: str,
    *,
    secret_files: Iterable[str] = (),
    extra: Iterable[str] = (),
    unhidden: Iterable[str] = (),
) -> tuple[str, ...]:
    """Every path the agent must not see, absolute and normalised, without duplicates.

    Args:
        home: the user's home directory (absolute).
        bridge_home: the bridge home (its database holds the identity key and stored tokens).
        secret_files: other files the bridge reads secrets from (a key file, a token file, a
            systemd credential directory); hidden like the bridge home, never un-hidden.
        extra: the user's additions (``~``-relative or absolute).
        unhidden: well-known or extra paths the user chose to show the agent.
    """
    keep = [posixpath.normpath(bridge_home)]
    keep.extend(expand_user(path, home) for path in secret_files)
    shown = {expand_user(path, home) for path in unhidden}
    optional = [posixpath.join(home, rel) for rel in HOME_SECRETS]
    optional.extend(expand_user(path, home) for path in extra)
    paths = keep + [path for path in map(posixpath.normpath, optional) if path not in shown]
    return tuple(dict.fromkeys(paths))


def is_hidden(path: str, hidden: Sequence[str]) -> bool:
    """Whether absolute, normalised `path` is one of `hidden` or lies below one."""
    return any(path == h or path.startswith(h.rstrip("/") + "/") for h in hidden)
