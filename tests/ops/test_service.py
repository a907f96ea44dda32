"""``service install|uninstall|show``: the units written, systemd-analyze, and the systemd calls.

Nothing here touches the machine's systemd: the CLI runs with ``--unit-dir`` (a temp folder),
and the flows that call ``systemctl`` get a fake `Systemd` that records the commands.
"""

from __future__ import annotations

import functools
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from bridge.service import (
    MARKER,
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
from tests.ops.support import REPO, CliResult, invoke

PATH = "/opt/tools/bin:/usr/bin:/bin"
Cli = Callable[..., CliResult]


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Cli:
    """``main([...])`` in this process: ``cli(*args, **env)``."""
    return functools.partial(invoke, capsys, monkeypatch)


def unit_lines(text: str) -> dict[str, list[str]]:
    """Key → values of the non-comment lines."""
    out: dict[str, list[str]] = {}
    for line in text.splitlines():
        if line and not line.startswith(("#", "[")):
            key, _, value = line.partition("=")
            out.setdefault(key, []).append(value)
    return out


def verify(path: Path) -> None:
    """``systemd-analyze verify`` the unit where the tool exists and can run here."""
    tool = shutil.which("systemd-analyze")
    if tool is None:
        pytest.skip("systemd-analyze is not installed")
    done = subprocess.run(
        [tool, "verify", str(path)], capture_output=True, text=True, timeout=60, check=False
    )
    output = done.stdout + done.stderr
    if "Failed to initialize manager" in output or "Failed to lookup RuntimeDirectory" in output:
        pytest.skip(f"systemd-analyze cannot run here: {output.strip()[:200]}")
    ours = [line for line in output.splitlines() if path.name.split("@")[0] in line]
    assert done.returncode == 0 and ours == [], output


# --- install / uninstall through the CLI ---------------------------------------------------------


@pytest.mark.integration
def test_install_writes_a_correct_user_unit(tmp_path: Path, cli: Cli) -> None:
    units = tmp_path / "units"
    home = tmp_path / "bridge home"
    result = cli(
        "service",
        "install",
        "--unit-dir",
        str(units),
        "--home",
        str(home),
        PATH=PATH,
    )
    assert result.code == 0, result.stderr
    unit = units / USER_UNIT
    assert f"{unit}: written" in result.stdout
    text = unit.read_text()
    keys = unit_lines(text)
    assert MARKER in text
    assert keys["Type"] == ["notify"] and keys["NotifyAccess"] == ["main"]
    assert keys["Restart"] == ["on-failure"] and keys["RestartPreventExitStatus"] == ["2"]
    assert keys["StartLimitBurst"] == ["5"] and keys["StartLimitIntervalSec"] == ["600"]
    assert keys["WatchdogSec"] == ["60s"] and keys["KillMode"] == ["mixed"]
    assert keys["NoNewPrivileges"] == ["yes"]
    assert "ProtectHome" not in keys and "PrivateTmp" not in keys
    # This installation: the tests run `python -m bridge`; from a source checkout that is not
    # pip-installed, the unit also needs PYTHONPATH.
    command, pythonpath = installation_command()
    assert command == (sys.executable, "-m", "bridge")
    assert keys["ExecStart"] == [f'{sys.executable} -m bridge run --home "{home}"']
    assert f"Environment=PATH={PATH}" in text
    if pythonpath is not None:
        assert pythonpath == str(REPO) and f"Environment=PYTHONPATH={REPO}" in text
    else:
        assert "PYTHONPATH" not in text
    assert keys["EnvironmentFile"] == [f"-{home}/service.env"]
    assert keys["WantedBy"] == ["default.target"]
    verify(unit)

    noted = cli("service", "show", CODEDECK_RELAYS="ws://127.0.0.1:1")
    assert noted.code == 0 and "Note:" not in noted.stdout  # show prints the unit only
    relays = cli(
        "service", "install", "--unit-dir", str(tmp_path / "u"), CODEDECK_RELAYS="ws://x:1"
    )
    assert "Note: CODEDECK_RELAYS is set in this shell but the service does not inherit it" in (
        relays.stdout
    )

    again = cli(
        "service",
        "install",
        "--unit-dir",
        str(units),
        "--home",
        str(home),
        PATH=PATH,
    )
    assert again.code == 0 and f"{unit}: unchanged" in again.stdout

    removed = cli("service", "uninstall", "--unit-dir", str(units))
    assert removed.code == 0 and f"{unit}: removed" in removed.stdout
    assert not unit.exists()
    nothing = cli("service", "uninstall", "--unit-dir", str(units))
    assert nothing.code == 0 and "nothing to remove" in nothing.stdout


@pytest.mark.integration
def test_install_writes_the_system_template(tmp_path: Path, cli: Cli) -> None:
    result = cli(
        "service",
        "install",
        "--system",
        "--run-as",
        "nobody",
        "--no-path",
        "--unit-dir",
        str(tmp_path),
    )
    assert result.code == 0, result.stderr
    unit = tmp_path / SYSTEM_UNIT
    keys = unit_lines(unit.read_text())
    assert keys["User"] == ["%i"]
    assert keys["ExecStart"] == [f"{sys.executable} -m bridge run"]
    assert keys["After"] == ["network-online.target"]
    assert keys["ProtectSystem"] == ["full"]
    assert keys["EnvironmentFile"] == ["-/etc/codedeck-bridge/%i.env"]
    assert keys["WantedBy"] == ["multi-user.target"]
    assert not any(v.startswith("PATH=") for v in keys.get("Environment", []))
    verify(unit)


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
