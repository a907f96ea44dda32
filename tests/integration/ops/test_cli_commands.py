"""``config show``, ``keys show``, ``decisions``, ``sessions``, ``run``'s session flags and the
CLI's error paths."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.ops.support import run_cli


@pytest.mark.parametrize(
    ("args", "code"),
    [(["keys", "show", "--bogus"], 2), (["decisions", "--home", "{file}"], 2)],
    ids=["usage", "home-is-a-file"],
)
def test_the_process_prints_no_traceback(tmp_path: Path, args: list[str], code: int) -> None:
    """The same paths as above, as a user runs them: a process, one line on stderr."""
    (tmp_path / "file").write_text("")
    result = run_cli(*(arg.format(file=tmp_path / "file") for arg in args))
    assert result.code == code
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith("codedeck-bridge")
