"""The gate's verdict against what bash really does, line by line, in a throwaway home.

For every attack of the corpus: bash, run in a bubblewrap jail where only a throwaway home is
writable, must show the harm on disk (so the line is a real attack here, not a typo), and the
gate must not have allowed it (``ask`` or ``block``). For every benign line: the gate allows it,
and bash runs it successfully without touching anything outside the project. The verdict is
proved against effects, not against another opinion of the line.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from bridge.gate import Outcome

from .corpus import ATTACKS, BENIGN, Line
from .jail import bwrap_missing
from .trial import Bench
from .web import serve_scripts

_MISSING = bwrap_missing()

pytestmark = pytest.mark.skipif(_MISSING is not None, reason=_MISSING or "")


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bench]:
    with serve_scripts() as server:
        yield Bench(tmp_path_factory.mktemp("differential"), server)


def _need(line: Line) -> None:
    missing = [program for program in line.needs if shutil.which(program) is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed")


@pytest.mark.parametrize("line", ATTACKS, ids=[f"{line.kind}:{line.id}" for line in ATTACKS])
def test_attack_does_harm_and_the_gate_does_not_allow_it(bench: Bench, line: Line) -> None:
    _need(line)
    trial = bench.trial(line)
    assert trial.effects.harmful, "the line did no harm in the jail:\n" + trial.describe()
    assert trial.decision.outcome is not Outcome.ALLOW, (
        "the gate allowed a harmful line:\n" + trial.describe()
    )


@pytest.mark.parametrize("line", BENIGN, ids=[line.id for line in BENIGN])
def test_benign_line_is_allowed_and_runs(bench: Bench, line: Line) -> None:
    _need(line)
    trial = bench.trial(line)
    assert trial.ran.returncode == 0, "the line failed in the jail:\n" + trial.describe()
    assert not trial.effects.harmful, "the line did harm:\n" + trial.describe()
    assert trial.decision.outcome is Outcome.ALLOW, (
        "the gate did not allow ordinary work:\n" + trial.describe()
    )


def test_the_tier_covers_every_class_of_attack() -> None:
    kinds = {line.kind for line in ATTACKS}
    assert kinds == {
        "abbreviated_option",
        "evaluated_later",
        "runs_commands",
        "force_push",
        "download_run",
        "wrapper",
        "secret",
        "symlink",
    }
    assert len({line.id for line in (*ATTACKS, *BENIGN)}) == len(ATTACKS) + len(BENIGN)


def test_the_measure_sees_no_harm_in_a_line_that_does_none(bench: Bench) -> None:
    """The measure itself: a line that only works in the project leaves no effect."""
    trial = bench.trial(Line("noop", "benign", "echo hi > note && cat note"))
    assert trial.ran.stdout == b"hi\n"
    assert not trial.effects.harmful, trial.describe()


def test_home_path_is_the_jails(bench: Bench, tmp_path: Path) -> None:
    """A line sees the jail's home, the one the gate judged (not the test machine's)."""
    trial = bench.trial(Line("home", "benign", 'echo "$HOME" && pwd'))
    assert trial.ran.stdout.decode().split() == [
        "/home/codedeck-redteam",
        "/home/codedeck-redteam/proj",
    ]
