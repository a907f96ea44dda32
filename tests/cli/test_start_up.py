"""Start-up loads the command's modules with the garbage collector off (``bridge/__main__.py``),
then turns it back on with start-up's objects frozen out of later collections."""

from __future__ import annotations

import gc

from bridge.cli import main as cli


def test_a_caller_that_left_the_collector_on_is_left_alone() -> None:
    assert gc.isenabled()
    frozen = gc.get_freeze_count()
    cli._loaded(collect=True)
    cli._loaded(collect=False)
    assert gc.isenabled()
    assert gc.get_freeze_count() == frozen
