"""The success checks run in the workspace; one the deny list blocks never runs."""

from __future__ import annotations

from pathlib import Path

from bridge.desiide.checks.runner import blocked_check


def test_a_deny_rule_blocks_a_check_and_floors_do_not(tmp_path: Path) -> None:
    assert blocked_check(tmp_path, [["make", "test"], ["npm", "run", "lint"]], ()) is None
    assert blocked_check(tmp_path, [["sudo", "make", "test"]], ()) is None  # a floor: still runs
    blocked = blocked_check(tmp_path, [["make", "test"], ["mkfs.ext4", "/dev/sda1"]], ())
    assert blocked is not None and "mkfs" in blocked


def test_a_check_that_names_a_hidden_path_is_blocked(tmp_path: Path) -> None:
    secret = str(tmp_path / "bridge-home")
    blocked = blocked_check(tmp_path, [["cat", f"{secret}/bridge.db"]], (secret,))
    assert blocked is not None and "deny_list:secret_path" in blocked
    assert blocked_check(tmp_path, [["cat", "README"]], (secret,)) is None
