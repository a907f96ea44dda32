"""The control socket's answers, over a real engine: pairing, its waiters, phones, status,
sessions (their hosts, and ``sessions.close``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.control.fake_hosts import FakeHosts
from tests.runtime.support import (
    session_record,
)
from tests.runtime.test_control_handler import make_rig


@pytest.fixture
def hosts(tmp_path: Path) -> Iterator[FakeHosts]:
    fake = FakeHosts(tmp_path / "home")
    try:
        yield fake
    finally:
        fake.close()


async def test_sessions_and_status_read_each_host(hosts: FakeHosts) -> None:
    rig = make_rig(
        home=str(hosts.home),
        sessions=[session_record("s-1", "/ws/a"), session_record("s-2", "/ws/b")],
    )
    pid = hosts.start("s-1")
    hosts.start("orphan")  # a host of a session the daemon does not have: counted, not listed
    listed = await rig.control.sessions_list()
    assert [(s["sessionId"], s["host"]) for s in listed] == [
        ("s-1", {"alive": True, "pid": pid}),
        ("s-2", {"alive": False, "pid": None}),
    ]
    assert (await rig.control.status())["hosts"] == {"running": 2}
    hosts.stop("s-1")
    assert (await rig.control.sessions_list())[0]["host"] == {"alive": False, "pid": None}
    assert (await rig.control.status())["hosts"] == {"running": 1}
