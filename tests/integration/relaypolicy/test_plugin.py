"""The strfry plugin loop: one answer line per request line, whatever comes in.

In-process tests drive :func:`relaypolicy.plugin.serve` with byte streams; process tests run the
command line of ``deploy/relay/strfry.conf`` (see ``tests/support/strfry_plugin_policy.py``)."""

from __future__ import annotations

import asyncio
import os
import random
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from store.registry import RegistryStore
from tests.relaypolicy.builders import NOW, PHONE, STRANGER, key, make_request
from tests.relaypolicy.test_plugin import _check_answer, _line
from tests.support.strfry_plugin_policy import (
    REPO_ROOT,
    PluginFailure,
    StrfryPluginPolicy,
    plugin_command,
)


def _spawn_plugin(tmp_path: Path, *extra: str) -> subprocess.Popen[bytes]:
    command = plugin_command(tmp_path / "registry.db")
    return subprocess.Popen(
        ["/bin/sh", "-c", command + "".join(f" {x}" for x in extra)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
    )


def test_process_fuzz_stdout_carries_only_answers(tmp_path: Path) -> None:
    """Random, truncated and binary lines through the pipes: one JSON answer per line, always."""
    rng = random.Random(20240601)
    lines: list[bytes] = []
    for i in range(400):
        choice = i % 5
        if choice == 0:
            lines.append(_line(make_request(kind=rng.choice([1, 445, 4515, 1059]))))
        elif choice == 1:
            full = _line(make_request())
            lines.append(full[: rng.randrange(len(full))].replace(b"\n", b"") + b"\n")
        elif choice == 2:
            lines.append(rng.randbytes(rng.randrange(300)).replace(b"\n", b"") + b"\n")
        elif choice == 3:
            lines.append(b"{" * rng.randrange(1, 5000) + b"\n")  # nesting bombs
        else:
            lines.append(b"\n")
    process = _spawn_plugin(tmp_path, "--log-level", "debug")
    out, err = process.communicate(b"".join(lines), timeout=60)
    assert process.returncode == 0, err.decode(errors="replace")
    answers = out.splitlines()
    assert len(answers) == len(lines)
    for line, raw in zip(lines, answers, strict=True):
        answer = orjson.loads(raw)
        _check_answer(answer)
        assert answer["id"] == "" or answer["id"].encode() in line
    assert b"stdin closed after 400 requests" in err


def test_stray_prints_cannot_reach_stdout(tmp_path: Path) -> None:
    """fd 1 is re-pointed at stderr: even a C-level write to fd 1 lands in the log."""
    sitecustomize = tmp_path / "site"
    sitecustomize.mkdir()
    # Loaded by the plugin's interpreter at startup: makes every decision print to stdout,
    # both through Python and straight to file descriptor 1.
    (sitecustomize / "sitecustomize.py").write_text(
        "import os\n"
        "import relaypolicy.pipeline as p\n"
        "orig = p.RelayPolicy.answer_line\n"
        "def noisy(self, line):\n"
        "    print('stray print while serving')\n"
        "    os.write(1, b'stray bytes on fd 1\\n')\n"
        "    return orig(self, line)\n"
        "p.RelayPolicy.answer_line = noisy\n"
    )
    command = plugin_command(tmp_path / "registry.db")
    process = subprocess.run(
        ["/bin/sh", "-c", command],
        input=_line(make_request()) + _line(make_request(kind=1)),
        capture_output=True,
        env={**os.environ, "PYTHONPATH": f"{sitecustomize}:{REPO_ROOT}"},
        timeout=60,
        check=False,
    )
    answers = [orjson.loads(a) for a in process.stdout.splitlines()]
    assert [a["msg"] for a in answers] == [
        "restricted: not a registered user",
        "blocked: kind 1 is not accepted on this private relay",
    ]
    assert b"stray print while serving" in process.stderr
    assert b"stray bytes on fd 1" in process.stderr


async def test_registry_changes_apply_without_restart(tmp_path: Path) -> None:
    plugin = StrfryPluginPolicy(plugin_command(tmp_path / "registry.db"))
    try:
        first = make_request(kind=24515, pubkey=STRANGER)
        assert (await plugin.request(first))["msg"] == "restricted: not a registered user"
        with RegistryStore.open(tmp_path / "registry.db") as store:
            store.register(STRANGER, now=NOW)
        second = make_request(kind=24515, pubkey=STRANGER)
        assert (await plugin.request(second))["action"] == "accept"
        with RegistryStore.open(tmp_path / "registry.db") as store:
            store.unregister(STRANGER)
        third = make_request(kind=24515, pubkey=STRANGER)
        assert (await plugin.request(third))["action"] == "reject"
        assert plugin.spawns == 1
    finally:
        assert await plugin.close() == 0
    assert plugin.stray_lines == []


async def test_unopenable_registry_rejects_and_keeps_serving(tmp_path: Path) -> None:
    registry = tmp_path / "not-yet" / "registry.db"
    plugin = StrfryPluginPolicy(plugin_command(registry))
    try:
        answer = await plugin.request(make_request(pubkey=PHONE))
        assert answer["msg"] == "error: internal error"
        registry.parent.mkdir()
        with RegistryStore.open(registry) as store:
            store.register(PHONE, now=NOW)
        for _ in range(100):  # the plugin retries opening at most once a second
            answer = await plugin.request(make_request(pubkey=PHONE))
            if answer["action"] == "accept":
                break
            await asyncio.sleep(0.05)
        assert answer["action"] == "accept"
        assert plugin.spawns == 1
    finally:
        assert await plugin.close() == 0
    assert any("registry unavailable" in line for line in plugin.stderr_lines)


async def test_adapter_fails_closed_on_protocol_errors(tmp_path: Path) -> None:
    """The strfry emulation itself: a plugin that answers the wrong id is killed and re-spawned."""
    liar = tmp_path / "liar.py"
    liar.write_text(
        "import sys\n"
        "for line in sys.stdin:\n"
        "    print('log line on stdout')\n"
        '    print(\'{"id":"' + key(1) + '","action":"accept","msg":""}\', flush=True)\n'
    )
    plugin = StrfryPluginPolicy(f"{sys.executable} {liar}", timeout=5)
    try:
        assert await plugin.admit_event(make_request()["event"], "127.0.0.1") == (
            False,
            "error: internal error",
        )
        assert plugin.failures == ["id mismatch"]
        assert plugin.stray_lines == [b"log line on stdout\n"]
        with pytest.raises(PluginFailure):
            await plugin.request(make_request())
        assert plugin.spawns == 2
    finally:
        await plugin.close()
