"""``service install|uninstall|show``: the units written, systemd-analyze, and the systemd calls.

Nothing here touches the machine's systemd: the CLI runs with ``--unit-dir`` (a temp folder),
and the flows that call ``systemctl`` get a fake `Systemd` that records the commands.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from bridge.service import (
    SYSTEM_UNIT,
    USER_UNIT,
    Systemd,
    UnitSpec,
    deploy_units,
    install,
    installation_command,
    quote_arg,
    render_unit,
    uninstall,
)
from tests.ops.support import REPO, Cli, unit_lines

# --- install / uninstall through the CLI ---------------------------------------------------------


def test_a_foreign_unit_is_neither_overwritten_nor_removed_without_force(
    tmp_path: Path, cli: Cli
) -> None:
    unit = tmp_path / USER_UNIT
    unit.write_text("[Service]\nExecStart=/bin/true\n")
    refused = cli("service", "install", "--unit-dir", str(tmp_path))
    assert refused.code == 1
    assert "was not written by codedeck-bridge; move it away or pass --force" in refused.stderr
    assert unit.read_text() == "[Service]\nExecStart=/bin/true\n"
    kept = cli("service", "uninstall", "--unit-dir", str(tmp_path))
    assert kept.code == 1 and unit.exists()
    forced = cli("service", "uninstall", "--unit-dir", str(tmp_path), "--force")
    assert forced.code == 0 and not unit.exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--run-as", "nobody"], "--run-as is for --system units"),
        (["--system", "--run-as", "root"], "the bridge does not run as root"),
        (["--system", "--run-as", "no-such-user-xyz"], "there is no account 'no-such-user-xyz'"),
        (["--credential", "/nonexistent/nsec"], "--credential: /nonexistent/nsec is not a file"),
    ],
    ids=["run-as-user-unit", "root", "unknown-account", "missing-credential"],
)
def test_usage_errors_exit_2_in_one_line(
    tmp_path: Path, args: list[str], message: str, cli: Cli
) -> None:
    result = cli("service", "install", "--unit-dir", str(tmp_path), *args)
    assert result.code == 2
    assert message in result.stderr and result.stderr.count("\n") == 1
    assert "Traceback" not in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_show_prints_the_unit_and_credentials_become_load_credential(
    tmp_path: Path, cli: Cli
) -> None:
    credential = tmp_path / "bridge.nsec"
    credential.write_text("x")
    result = cli("service", "show", "--credential", str(credential), "--no-path")
    assert result.code == 0
    assert f"\nLoadCredential=nsec:{credential}\n" in result.stdout
    assert "#Environment=PATH=%h/.local/bin" in result.stdout


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


def test_installation_command_prefers_the_console_script(tmp_path: Path) -> None:
    script = tmp_path / "codedeck-bridge"
    script.write_text("#!/bin/sh\n")
    assert installation_command(str(script), sys.executable) == ((str(script),), None)
    command, _ = installation_command(str(REPO / "bridge" / "__main__.py"), sys.executable)
    assert command == (sys.executable, "-m", "bridge")


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
