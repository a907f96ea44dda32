"""``codedeck-bridge pair`` as a real process: on a terminal (pty), and stopped with Ctrl-C."""

from __future__ import annotations

import asyncio
import os
import pty
import signal
import sys
import threading
from pathlib import Path

from bridge.control import ControlServer
from bridge.nostr.keys import Keypair
from tests.control.fake_handler import FakeHandler

REPO = Path(__file__).resolve().parents[3]
PHONE = Keypair.from_secret("02" * 32)


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO)
    env["LANG"] = env["LC_ALL"] = "C.UTF-8"
    env.pop("CODEDECK_HOME", None)
    return env


def default_sigint() -> None:
    """In the child, before exec: SIGINT back to its default disposition.

    A test runner started in the background by a non-interactive shell (``make test &``, some
    CI runners) ignores SIGINT, and an ignored signal stays ignored across exec: the child's
    Python would then never see Ctrl-C. A user's terminal never starts it that way.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def pair_argv(home: Path) -> list[str]:
    return [sys.executable, "-m", "bridge", "pair", "--home", str(home)]


class PtyReader:
    """Collects what the child writes to its terminal, on a thread (reads block)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.data = bytearray()
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while True:
            try:
                chunk = os.read(self.fd, 4096)
            except OSError:  # EIO once the child's side is closed
                return
            if not chunk:
                return
            with self.lock:
                self.data += chunk

    def text(self) -> str:
        with self.lock:
            return self.data.decode("utf-8", errors="replace")


async def test_pair_on_a_terminal_draws_the_qr_and_a_countdown_in_place(
    daemon: ControlServer, home: Path, handler: FakeHandler
) -> None:
    master, slave = pty.openpty()
    try:
        proc = await asyncio.create_subprocess_exec(
            *pair_argv(home),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=slave,
            stderr=asyncio.subprocess.PIPE,
            env=child_env(),
            cwd=REPO,
        )
    finally:
        os.close(slave)
    reader = PtyReader(master)
    try:
        await asyncio.wait_for(handler.waiting.wait(), 60)
        for _ in range(600):
            if "Waiting for a phone to pair:" in reader.text():
                break
            await asyncio.sleep(0.05)
        handler.pair_now(PHONE, "Pixel 8")
        _, stderr = await asyncio.wait_for(proc.communicate(), 60)
        await asyncio.to_thread(reader.thread.join, 10)
    finally:
        os.close(master)
    screen = reader.text()
    assert proc.returncode == 0, stderr.decode()
    assert "▀" in screen and "█" in screen and "▄" in screen
    assert "\x1b[7m" not in screen  # half blocks, not the ANSI fallback
    assert "\r\x1b[KWaiting for a phone to pair: 9:5" in screen  # one line, rewritten in place
    assert "(Ctrl-C stops waiting)" in screen
    assert screen.rstrip().endswith(f"Paired Pixel 8 ({PHONE.npub}).")
    assert b"Traceback" not in stderr


async def test_ctrl_c_stops_waiting_and_says_the_window_stays_open(
    daemon: ControlServer, home: Path, handler: FakeHandler
) -> None:
    proc = await asyncio.create_subprocess_exec(
        *pair_argv(home),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=child_env(),
        cwd=REPO,
        preexec_fn=default_sigint,
    )
    try:
        await asyncio.wait_for(handler.waiting.wait(), 60)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = await asyncio.wait_for(proc.communicate(), 60)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    err = stderr.decode()
    assert proc.returncode == 130
    assert "Traceback" not in err
    assert "Stopped waiting. The pairing window stays open until " in err
    assert "a phone can still pair until then" in err
    assert "codedeck://pair?" in stdout.decode()
    # the daemon's wait was cancelled when the command went away; the window itself was not closed
    await asyncio.wait_for(handler.wait_cancelled.wait(), 30)
    # (status: the fake's relay is loopback, so pair asks whether it is the embedded one)
    assert [name for name, _ in handler.calls] == ["pair_open", "status", "pair_wait"]
