"""The success checks run in the workspace; one the deny list blocks never runs."""

from __future__ import annotations

from pathlib import Path

from bridge.desiide.checks.runner import run_checks


async def test_checks_stop_at_the_first_failure_and_keep_the_tail(tmp_path: Path) -> None:
    ok = await run_checks(tmp_path, [["sh", "-c", "echo fine"], ["true"]])
    assert ok.ok and "fine" in ok.output
    failed = await run_checks(
        tmp_path, [["sh", "-c", "echo broke; exit 3"], ["sh", "-c", "echo never"]]
    )
    assert not failed.ok and "broke" in failed.output and "(exit 3)" in failed.output
    assert "never" not in failed.output
    missing = await run_checks(tmp_path, [["no-such-program-xyz"]])
    assert not missing.ok and "cannot run" in missing.output


async def test_a_hung_check_is_stopped_at_its_time_limit(tmp_path: Path) -> None:
    hung = await run_checks(tmp_path, [["sh", "-c", "sleep 30 & sleep 30"]], timeout=0.3)
    assert not hung.ok and "stopped after" in hung.output
