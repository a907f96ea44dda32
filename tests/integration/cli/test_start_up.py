"""Start-up loads the command's modules with the garbage collector off (``bridge/__main__.py``),
then turns it back on with start-up's objects frozen out of later collections."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


CHECK = """
import gc
import bridge.__main__  # as the console script and `python -m bridge` begin
assert not gc.isenabled(), "the collector is on while the modules load"
from bridge.cli import main as cli
from bridge.runtime import daemon  # what `run` loads before it turns the collector back on
cli._loaded(collect=True)
print(gc.isenabled(), gc.get_freeze_count())
"""


def test_the_entry_point_loads_with_the_collector_off_and_turns_it_back_on_frozen() -> None:
    done = subprocess.run(
        [sys.executable, "-c", CHECK], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    enabled, frozen = done.stdout.split()
    assert enabled == "True"
    assert int(frozen) > 10_000  # the modules' objects, out of every later collection


def test_a_command_run_by_the_console_script_ends_with_the_collector_on(tmp_path: Path) -> None:
    script = (
        "import gc, sys\n"
        "from bridge.__main__ import main\n"
        "code = main(sys.argv[1:])\n"
        "print(gc.isenabled(), code)\n"
    )
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    done = subprocess.run(
        [sys.executable, "-c", script, "status", "--home", str(home)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    *said, last = done.stdout.splitlines()
    assert last.split() == ["True", "1"], done.stderr  # 1: no daemon runs there
    assert "no codedeck-bridge is running" in "".join(said) + done.stderr
