"""The one list of paths an agent never sees: what it holds and what a user may take out of it."""

from __future__ import annotations

import pytest

from bridge.sandbox import HOME_SECRETS, expand_user, hidden_paths, is_hidden

HOME = "/home/u"


def test_the_bridge_home_and_secret_files_come_first_and_cannot_be_unhidden() -> None:
    paths = hidden_paths(
        HOME,
        "/home/u/.codedeck",
        secret_files=["/etc/codedeck/key", "~/tokens/relay"],
        unhidden=["/home/u/.codedeck", "/etc/codedeck/key", "~/tokens/relay"],
    )
    assert paths[:3] == ("/home/u/.codedeck", "/etc/codedeck/key", "/home/u/tokens/relay")


def test_every_well_known_secret_is_hidden_under_the_home() -> None:
    paths = hidden_paths(HOME, "/var/lib/codedeck")
    for rel in (".ssh", ".gnupg", ".aws", ".config/gh", ".netrc", ".git-credentials", ".kube"):
        assert f"{HOME}/{rel}" in paths
    assert len(paths) == 1 + len(HOME_SECRETS)


def test_a_user_unhides_a_well_known_path_and_adds_their_own() -> None:
    paths = hidden_paths(HOME, "/c", extra=["~/work/.env", "/srv/keys/"], unhidden=["~/.config/gh"])
    assert "/home/u/.config/gh" not in paths
    assert "/home/u/work/.env" in paths
    assert "/srv/keys" in paths  # normalised: no trailing slash


def test_duplicates_are_dropped_in_order() -> None:
    paths = hidden_paths(HOME, "/home/u/.ssh", extra=["~/.ssh", ".ssh"])
    assert paths.count("/home/u/.ssh") == 1
    assert paths[0] == "/home/u/.ssh"


@pytest.mark.parametrize(
    ("raw", "expanded"),
    [("~", "/home/u"), ("~/a/../b", "/home/u/b"), (".aws", "/home/u/.aws"), ("/x//y/", "/x/y")],
)
def test_expand_user(raw: str, expanded: str) -> None:
    assert expand_user(raw, HOME) == expanded


@pytest.mark.parametrize(
    ("path", "hidden"),
    [
        ("/home/u/.ssh", True),
        ("/home/u/.ssh/id_ed25519", True),
        ("/home/u/.sshx", False),
        ("/home/u", False),
        ("/home/u/.codedeck/bridge.db", True),
    ],
)
def test_is_hidden_is_the_path_or_below_it(path: str, hidden: bool) -> None:
    assert is_hidden(path, hidden_paths(HOME, "/home/u/.codedeck")) is hidden
