"""``service install|uninstall|show``: the units written, systemd-analyze, and the systemd calls.

Nothing here touches the machine's systemd: the CLI runs with ``--unit-dir`` (a temp folder),
and the flows that call ``systemctl`` get a fake `Systemd` that records the commands.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest

from bridge.cli.main import build_parser
from bridge.runtime.hosts.close import ClosedSessions
from bridge.service import (
    SYSTEM_UNIT,
    USER_UNIT,
    ServiceError,
    Systemd,
    UnitSpec,
    deploy_units,
    install,
    quote_arg,
    render_unit,
    run_service_command,
    uninstall,
    unit_home,
)
from tests.ops.support import REPO, unit_lines

# --- install / uninstall through the CLI ---------------------------------------------------------


# --- rendering ----------------------------------------------------------------------------------

QUOTES = [
    ("/usr/bin/codedeck-bridge", "/usr/bin/codedeck-bridge"),
    ("/home/a b/bin/x", '"/home/a b/bin/x"'),
    ("/data/100%/x", "/data/100%%/x"),
    ("/opt/$HOME/x", "/opt/$$HOME/x"),
    ('/q"uote', '"/q\\"uote"'),
    ("/back\\slash", '"/back\\\\slash"'),
]


@pytest.mark.parametrize(("word", "quoted"), QUOTES)
def test_exec_start_words_are_escaped_for_systemd(word: str, quoted: str) -> None:
    assert quote_arg(word) == quoted


def test_control_characters_are_refused() -> None:
    with pytest.raises(ValueError, match="control characters"):
        quote_arg("/bin/x\nExecStartPre=/bin/evil")


def test_home_with_specifier_characters_is_escaped_everywhere() -> None:
    text = render_unit(UnitSpec("user", ("/bin/cb",), home=Path("/srv/50% off")))
    keys = unit_lines(text)
    assert keys["ExecStart"] == ['/bin/cb run --home "/srv/50%% off"']
    assert keys["EnvironmentFile"] == ["-/srv/50%% off/service.env"]


@pytest.mark.parametrize(
    "home",
    ["/srv/50% off", "/plain", '/a b/$x\\y"z', "/data/%%i"],
    ids=["specifier", "plain", "quotes-dollar-backslash", "double-percent"],
)
def test_unit_home_reads_back_what_render_unit_wrote(home: str) -> None:
    assert unit_home(render_unit(UnitSpec("user", ("/bin/cb",), home=Path(home)))) == Path(home)


@pytest.mark.parametrize(
    "text",
    [
        render_unit(UnitSpec("user", ("/bin/cb",))),
        "[Service]\nExecStart=/bin/cb run --home\n",
        "[Service]\nExecStart=/bin/cb run --home relative/dir\n",
        '[Service]\nExecStart=/bin/cb run --home "/unterminated\n',
        "[Service]\n",
    ],
    ids=["default-home", "dangling-flag", "relative", "bad-quoting", "no-exec-start"],
)
def test_unit_home_is_none_without_a_usable_home(text: str) -> None:
    assert unit_home(text) is None


def test_units_let_sessions_outlive_a_stop_of_the_daemon() -> None:
    for text in deploy_units().values():
        keys = unit_lines(text)
        assert keys["KillMode"] == ["process"] and keys["TimeoutStopSec"] == ["30s"]
        assert "`codedeck-bridge sessions close ID|--all`, or `service uninstall`" in text


def test_deploy_units_are_the_renderings() -> None:
    """deploy/systemd/ must match the code; regenerate with the snippet in the message."""
    for name, text in deploy_units().items():
        shipped = (REPO / "deploy" / "systemd" / name).read_text()
        assert shipped == text, (
            f"deploy/systemd/{name} is out of date; regenerate: PYTHONPATH=. python -c "
            '"from pathlib import Path; from bridge.service import deploy_units; '
            "[Path('deploy/systemd', n).write_text(t) for n, t in deploy_units().items()]\""
        )
    assert "ExecStart=%h/.local/bin/codedeck-bridge run" in deploy_units()[USER_UNIT]


# --- the systemctl calls, with a fake systemd ---------------------------------------------------


class FakeRun:
    def __init__(self, fail: str | None = None, linger: str = "no") -> None:
        self.calls: list[list[str]] = []
        self.fail = fail
        self.linger = linger

    def __call__(self, argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
        self.calls.append(list(argv))
        if argv[0] == "loginctl":
            return subprocess.CompletedProcess(list(argv), 0, self.linger + "\n", "")
        if self.fail is not None and self.fail in argv:
            return subprocess.CompletedProcess(list(argv), 1, "", "Failed to connect to bus\n")
        return subprocess.CompletedProcess(list(argv), 0, "", "")


SPEC = UnitSpec("user", ("/bin/cb",))


def test_install_reloads_enables_and_starts(tmp_path: Path) -> None:
    run = FakeRun()
    systemd = Systemd("/bin/systemctl", True, run)
    env = {"XDG_CONFIG_HOME": str(tmp_path / "cfg"), "USER": "alice"}
    outcome = install(
        SPEC,
        unit_dir=None,
        enable=True,
        force=False,
        account=None,
        systemd=systemd,
        env=env,
        bridge_home=tmp_path / "home",
    )
    assert outcome.complete
    assert (tmp_path / "cfg" / "systemd" / "user" / USER_UNIT).exists()
    assert run.calls[:2] == [
        ["/bin/systemctl", "--user", "daemon-reload"],
        ["/bin/systemctl", "--user", "enable", "--now", USER_UNIT],
    ]
    assert any("loginctl enable-linger alice" in line for line in outcome.lines)

    removed = uninstall("user", unit_dir=None, force=False, account=None, systemd=systemd, env=env)
    assert removed.complete
    assert run.calls[-2:] == [
        ["/bin/systemctl", "--user", "disable", "--now", USER_UNIT],
        ["/bin/systemctl", "--user", "daemon-reload"],
    ]
    assert not (tmp_path / "cfg" / "systemd" / "user" / USER_UNIT).exists()


def test_a_failed_systemctl_step_leaves_the_rest_to_do(tmp_path: Path) -> None:
    systemd = Systemd("/bin/systemctl", True, FakeRun(fail="daemon-reload"))
    outcome = install(
        SPEC,
        unit_dir=None,
        enable=True,
        force=False,
        account=None,
        systemd=systemd,
        env={"XDG_CONFIG_HOME": str(tmp_path)},
        bridge_home=tmp_path,
    )
    assert not outcome.complete
    assert outcome.todo == [
        "systemctl --user daemon-reload",
        f"systemctl --user enable --now {USER_UNIT}",
    ]
    assert any("Failed to connect to bus" in line for line in outcome.lines)


def test_without_systemd_the_file_is_written_and_the_commands_printed(tmp_path: Path) -> None:
    run = FakeRun()
    outcome = install(
        SPEC,
        unit_dir=None,
        enable=False,
        force=False,
        account=None,
        systemd=Systemd(None, False, run),
        env={"XDG_CONFIG_HOME": str(tmp_path)},
        bridge_home=tmp_path,
    )
    assert run.calls == []
    assert (tmp_path / "systemd" / "user" / USER_UNIT).exists()
    assert outcome.todo == ["systemctl --user daemon-reload"]
    assert "systemctl is not installed" in outcome.lines[-1]


def test_system_template_is_kept_while_other_instances_use_it(tmp_path: Path) -> None:
    run = FakeRun()
    systemd = Systemd("/bin/systemctl", True, run)
    (tmp_path / SYSTEM_UNIT).write_text(render_unit(UnitSpec("system", ("/bin/cb",))))
    wants = tmp_path / "multi-user.target.wants"
    wants.mkdir()
    (wants / "codedeck-bridge@bob.service").symlink_to(tmp_path / SYSTEM_UNIT)
    outcome = uninstall(
        "system", unit_dir=tmp_path, force=False, account="alice", systemd=systemd, env={}
    )
    assert (tmp_path / SYSTEM_UNIT).exists()
    assert any(
        "other instances still use it (codedeck-bridge@bob.service)" in line
        for line in outcome.lines
    )


# --- uninstall closes the sessions ----------------------------------------------------------------


class FakeCloser:
    """Stands in for `close_every_session`, logging into the systemctl log to check the order."""

    def __init__(self, log: list[list[str]], fail: int = 0) -> None:
        self.log = log
        self.fail = fail  # how many calls raise

    def __call__(self, home: Path, account: str | None) -> ClosedSessions:
        self.log.append(["close", str(home), str(account)])
        if self.fail:
            self.fail -= 1
            raise ServiceError("the daemon did not answer")
        if len([c for c in self.log if c[0] == "close"]) == 1:
            return ClosedSessions(("s-1", "s-2"), daemon=True, hosts_stopped=2)
        return ClosedSessions((), daemon=False, hosts_stopped=0)


def uninstall_cli(
    tmp_path: Path, run: FakeRun, closer: FakeCloser, *args: str, **extra: str
) -> int:
    """``service uninstall ARGS`` with a fake systemd and closer; its exit status."""
    env = {"XDG_CONFIG_HOME": str(tmp_path / "cfg"), **extra}
    parsed = build_parser().parse_args(["service", "uninstall", *args])
    return run_service_command(
        parsed, systemd=Systemd("/bin/systemctl", True, run), env=env, close=closer
    )


def installed_unit(tmp_path: Path, home: Path | None) -> Path:
    path = tmp_path / "cfg" / "systemd" / "user" / USER_UNIT
    path.parent.mkdir(parents=True)
    path.write_text(render_unit(UnitSpec("user", ("/bin/cb",), home=home)))
    return path


def test_uninstall_closes_the_sessions_before_and_after_stopping_the_service(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home = tmp_path / "bridge home"
    unit = installed_unit(tmp_path, home)
    run = FakeRun()
    code = uninstall_cli(tmp_path, run, FakeCloser(run.calls))
    assert code == 0
    assert run.calls == [
        ["close", str(home), "None"],  # the home the unit runs with
        ["/bin/systemctl", "--user", "disable", "--now", USER_UNIT],
        ["/bin/systemctl", "--user", "daemon-reload"],
        ["close", str(home), "None"],  # what started meanwhile, and any host left
    ]
    assert not unit.exists()
    out = capsys.readouterr().out.splitlines()
    assert out[:3] == [
        "Closed 2 session(s) through the running daemon; their hosts have stopped and the "
        "phones are told:",
        "  s-1",
        "  s-2",
    ]
    assert out[-1] == f"No session and no session host left under {home}."


def test_uninstall_home_flag_wins_and_the_default_home_is_the_fallback(tmp_path: Path) -> None:
    installed_unit(tmp_path, tmp_path / "from-unit")
    run = FakeRun()
    assert uninstall_cli(tmp_path, run, FakeCloser(run.calls), "--home", "/srv/given") == 0
    assert run.calls[0] == ["close", "/srv/given", "None"]
    installed_unit(tmp_path / "b", None)
    run = FakeRun()
    default = str(tmp_path / "default-home")
    assert uninstall_cli(tmp_path / "b", run, FakeCloser(run.calls), CODEDECK_HOME=default) == 0
    assert run.calls[0] == ["close", default, "None"]


def test_uninstall_that_cannot_close_says_what_to_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home = tmp_path / "h"
    installed_unit(tmp_path, home)
    run = FakeRun()
    code = uninstall_cli(tmp_path, run, FakeCloser(run.calls, fail=2))
    assert code == 1
    out = capsys.readouterr().out
    assert (
        f"Could not close the sessions of {home} first (the daemon did not answer); trying "
        "again once the service has stopped." in out
    )
    assert f"Could not close the sessions of {home}: the daemon did not answer" in out
    assert out.endswith(f"To finish, run:\n  codedeck-bridge sessions close --all --home {home}\n")
    assert ["/bin/systemctl", "--user", "disable", "--now", USER_UNIT] in run.calls


def test_uninstall_leaves_the_sessions_alone_with_unit_dir_or_nothing_installed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = FakeRun()
    closer = FakeCloser(run.calls)
    assert uninstall_cli(tmp_path, run, closer, "--unit-dir", str(tmp_path)) == 0
    assert "The sessions were left alone (--unit-dir)." in capsys.readouterr().out
    assert uninstall_cli(tmp_path, run, closer) == 0
    assert f"The sessions were left alone (no {USER_UNIT} is installed)." in (
        capsys.readouterr().out
    )
    assert not any(call[0] == "close" for call in run.calls)


def test_uninstall_of_a_foreign_unit_closes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    unit = installed_unit(tmp_path, None)
    unit.write_text("[Service]\nExecStart=/bin/true\n")
    run = FakeRun()
    code = uninstall_cli(tmp_path, run, FakeCloser(run.calls))
    assert code == 1
    assert "was not written by codedeck-bridge; remove it yourself or pass --force" in (
        capsys.readouterr().err
    )
    assert run.calls == [] and unit.exists()
