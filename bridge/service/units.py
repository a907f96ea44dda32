"""The systemd units of codedeck-bridge, rendered from a `UnitSpec`.

Two units:

- ``codedeck-bridge.service``, a **user** unit (``systemctl --user``) for a dev machine: the
  sessions run as you, in your home, with your Claude Code login;
- ``codedeck-bridge@.service``, a **system** template for a headless server, one instance per
  account (``codedeck-bridge@alice``, ``User=%i``).

The files in ``deploy/systemd/`` are `deploy_units()`: these renderings with a generic
``ExecStart``; a test keeps them equal. The comments in the units say what each line protects and
why the stronger sandboxing options are absent. Every unit carries `MARKER`, by which
``service install|uninstall`` recognise a file they may overwrite or remove.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Final, Literal

from bridge.records import record

__all__ = [
    "ENV_FILE_NAME",
    "GENERIC_SYSTEM_COMMAND",
    "GENERIC_USER_COMMAND",
    "MARKER",
    "SYSTEM_ENV_DIR",
    "SYSTEM_UNIT",
    "USER_UNIT",
    "Scope",
    "UnitSpec",
    "deploy_units",
    "quote_arg",
    "render_unit",
    "unit_home",
]

Scope = Literal["user", "system"]

USER_UNIT: Final = "codedeck-bridge.service"
SYSTEM_UNIT: Final = "codedeck-bridge@.service"
MARKER: Final = "# Managed by `codedeck-bridge service install`; remove with `service uninstall`."
ENV_FILE_NAME: Final = "service.env"
"""The optional EnvironmentFile in the bridge home that a user unit loads (credentials)."""
SYSTEM_ENV_DIR: Final = "/etc/codedeck-bridge"


def quote_arg(arg: str) -> str:
    """One ``ExecStart=`` word, quoted and escaped for systemd (specifiers and variables too).

    systemd expands ``%`` specifiers and ``$VAR`` in ``ExecStart=``; a path holding either must
    have them doubled. Words with blanks, quotes or backslashes are double-quoted with C escapes.
    """
    if not arg or any(ord(ch) < 0x20 for ch in arg):
        raise ValueError("a command word must be non-empty and free of control characters")
    text = arg.replace("%", "%%").replace("$", "$$")
    if any(ch in text for ch in " \t\"'\\;"):
        text = '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return text


def _quote_assignment(name: str, value: str) -> str:
    """``Environment=`` form of ``name=value`` (quoted as a whole; ``%`` doubled)."""
    if any(ord(ch) < 0x20 for ch in value):
        raise ValueError(f"{name} must not contain control characters")
    text = f"{name}={value}".replace("%", "%%")
    if any(ch in text for ch in " \t\"'\\"):
        text = '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return text


@record
class UnitSpec:
    """What varies between installations.

    Attributes:
        scope: ``user`` (codedeck-bridge.service) or ``system`` (codedeck-bridge@.service).
        command: the argv that starts ``codedeck-bridge`` (``run`` and options are appended).
        home: a ``--home`` for ``run``, or None for the default home of the account.
        path: the ``PATH`` for the service, or None to keep systemd's (a commented hint then).
        pythonpath: a ``PYTHONPATH`` (a source checkout run as ``python -m bridge``), or None.
        credential: a file systemd hands over as the bridge key (``LoadCredential=nsec:…``).
        specifiers: keep ``%`` specifiers in `command` (``%h/.local/bin/…``) instead of escaping
            them; only for the generic units in ``deploy/systemd/``.
    """

    scope: Scope
    command: tuple[str, ...]
    home: Path | None = None
    path: str | None = None
    pythonpath: str | None = None
    credential: Path | None = None
    specifiers: bool = False


_HEADER_USER = """\
# codedeck-bridge as a systemd user service: `systemctl --user status codedeck-bridge`.
{marker}
# Change settings with a drop-in (`systemctl --user edit codedeck-bridge`): it survives a
# re-install, which rewrites this file. Logs: `journalctl --user -u codedeck-bridge`.
# To run while you are logged out (and from boot): `loginctl enable-linger $USER`.
"""

_HEADER_SYSTEM = """\
# codedeck-bridge as a system service, one instance per account, for headless servers:
#   systemctl enable --now codedeck-bridge@alice    (runs as the user alice)
{marker}
# Change settings with a drop-in (`systemctl edit codedeck-bridge@`): it survives a
# re-install, which rewrites this file. Logs: `journalctl -u codedeck-bridge@alice`.
"""

_LIMITS = """\
# At most 5 starts within 10 minutes; after that systemd stops trying until
# `systemctl{user_flag} reset-failed {unit}`: a crash loop must not hammer the relays or the journal.
StartLimitIntervalSec=600
StartLimitBurst=5
"""

_SERVICE_CORE = """\
# The daemon sends READY=1 once it serves (control socket open, relays connecting), STATUS=
# lines (relays connected, paired phones, running sessions) and STOPPING=1 when it shuts down.
# Running under systemd (INVOCATION_ID is set) makes it announce itself as host "service".
Type=notify
# Only the daemon itself may notify: not the Claude Code processes it starts.
NotifyAccess=main
ExecStart={exec_start}
Restart=on-failure
RestartSec=5s
# Exit status 2 is a configuration error: restarting cannot fix it, so stay failed and say why.
RestartPreventExitStatus=2
# The daemon sends WATCHDOG=1 every WatchdogSec/2 from its event loop. If the loop hangs for
# 60 s, systemd kills the daemon (SIGABRT, with a Python traceback in the journal) and restarts it.
WatchdogSec=60s
# Sessions outlive the daemon: each runs in a session host, a process of its own that owns the
# Claude Code process and keeps every event it produces. So a stop or a restart (an upgrade, a
# crash, the watchdog) kills only the daemon (process): SIGTERM, then SIGKILL after
# TimeoutStopSec, go to the daemon alone. The daemon publishes the final "machine offline"
# heartbeat and leaves its sessions running; the hosts keep their agents working, and the next
# daemon adopts them and replays what happened meanwhile. At that start systemd logs "Found
# left-over process ... in control group while starting unit. Ignoring.": those are the hosts,
# as intended. control-group and mixed would kill every session with the daemon.
# Sessions end on purpose: `codedeck-bridge sessions close ID|--all`, or `service uninstall`,
# which closes them all before it removes the service.
KillMode=process
TimeoutStopSec=30s
"""

_HARDENING_COMMON = """\
# --- hardening ---------------------------------------------------------------------------------
# Claude Code sessions are your own developer tools: they read and write the workspaces in your
# home, run compilers, package managers, git and test suites, and reach the network. Only what
# none of that needs is taken away:
# setuid programs (sudo, su, pkexec) cannot raise privileges: a session driven from a phone
# never becomes root. (Rootless podman's setuid newuidmap stops working too; remove this line
# in a drop-in if your sessions need it.)
NoNewPrivileges=yes
# No setuid/setgid files can be created (a session cannot plant a privileged binary).
RestrictSUIDSGID=yes
# No realtime scheduling: a runaway session cannot freeze the machine.
RestrictRealtime=yes
# No switching of the execution domain (personality(2)), an old exploit helper.
LockPersonality=yes
"""

_HARDENING_SYSTEM = """\
# /usr, /boot, /efi and /etc are read-only even for a process that found a way around its user.
ProtectSystem=full
# Kernel tunables (/proc/sys, /sys), module loading, the kernel log and the host name are out
# of reach: no development task needs to change them.
ProtectKernelTunables=yes
ProtectKernelModules=yes
ProtectKernelLogs=yes
ProtectHostname=yes
"""

_ABSENT_USER = """\
# Deliberately absent:
# - ProtectHome=: the sessions work in your home (workspaces, ~/.claude, tool caches).
# - ProtectSystem=, ProtectKernel*=: in a user service they need unprivileged user namespaces
#   and silently turn on PrivateUsers=; your user cannot write /usr, /etc or /proc/sys anyway.
"""

_ABSENT_COMMON = """\
# - PrivateTmp=: sessions share /tmp with you (you may ask one about a file there).
# - MemoryDenyWriteExecute=: breaks the JIT of Node.js, which Claude Code runs on.
# - SystemCallFilter=: development tools use unusual system calls (ptrace for debuggers,
#   perf_event_open for profilers, io_uring for some runtimes).
# - RestrictNamespaces=: Claude Code's own sandbox (bubblewrap) and rootless containers need them.
# - PrivateNetwork=, RestrictAddressFamilies=, IPAddressDeny=: the bridge needs its relays and
#   sessions need package registries and APIs.
# - UMask=0077: files sessions create in your repositories would become private; the bridge
#   makes its own files 0600 regardless.
"""


def _exec_start(spec: UnitSpec) -> str:
    command = [
        quote_arg(word).replace("%%", "%") if spec.specifiers else quote_arg(word)
        for word in spec.command
    ]
    words = [*command, "run"]
    if spec.home is not None:
        words += ["--home", quote_arg(str(spec.home))]
    return " ".join(words)


def unit_home(text: str) -> Path | None:
    """The ``--home`` of a unit's ``ExecStart=`` (as `render_unit` wrote it), or None.

    ``service uninstall`` closes the sessions of the home the installed service serves, which
    ``service install --home DIR`` wrote into the unit. A line it cannot read gives None.
    """
    for line in text.splitlines():
        if not line.startswith("ExecStart="):
            continue
        try:
            words = shlex.split(line.removeprefix("ExecStart="))
        except ValueError:
            return None
        if "--home" in words[:-1]:
            word = words[words.index("--home") + 1]
            home = word.replace("%%", "%").replace("$$", "$")
            return Path(home) if home.startswith("/") else None
        return None
    return None


GENERIC_USER_COMMAND: Final = "%h/.local/bin/codedeck-bridge"
GENERIC_SYSTEM_COMMAND: Final = "/usr/local/bin/codedeck-bridge"


def deploy_units() -> dict[str, str]:
    """The generic units shipped in ``deploy/systemd/`` (file name → text).

    They assume ``codedeck-bridge`` installed with pipx or ``pip install --user`` (user unit) or
    system-wide (system unit); ``service install`` writes the exact path instead.
    """
    return {
        USER_UNIT: render_unit(UnitSpec("user", (GENERIC_USER_COMMAND,), specifiers=True)),
        SYSTEM_UNIT: render_unit(UnitSpec("system", (GENERIC_SYSTEM_COMMAND,))),
    }


def render_unit(spec: UnitSpec) -> str:
    """The unit file text for `spec` (see the module docstring)."""
    system = spec.scope == "system"
    lines: list[str] = []
    lines.append((_HEADER_SYSTEM if system else _HEADER_USER).format(marker=MARKER))
    lines.append("[Unit]")
    if system:
        lines.append("Description=codedeck-bridge for %i: Claude Code sessions driven from a phone")
        lines.append("# Relays are on the network; the daemon also reconnects by itself.")
        lines.append("Wants=network-online.target")
        lines.append("After=network-online.target")
    else:
        lines.append("Description=codedeck-bridge: Claude Code sessions driven from a phone")
        lines.append(
            "# (no network-online.target: a user manager cannot order against it; the daemon"
        )
        lines.append("# keeps reconnecting to its relays with backoff instead)")
    lines.append(
        _LIMITS.format(
            user_flag="" if system else " --user",
            unit="codedeck-bridge@alice" if system else "codedeck-bridge",
        ).rstrip("\n")
    )
    lines.append("")
    lines.append("[Service]")
    if system:
        lines.append(
            "# The account the sessions run as: the instance name (codedeck-bridge@alice)."
        )
        lines.append("User=%i")
    lines.append(_SERVICE_CORE.format(exec_start=_exec_start(spec)).rstrip("\n"))
    lines.append("# Credentials for the sessions (ANTHROPIC_API_KEY=…, ANTHROPIC_BASE_URL=…), one")
    lines.append(
        "# NAME=value per line, mode 0600; optional (the leading '-'). `codedeck-bridge doctor`"
    )
    lines.append("# checks it. A Claude Code login (~/.claude) works without it.")
    if system:
        lines.append(f"EnvironmentFile=-{SYSTEM_ENV_DIR}/%i.env")
    else:
        env_dir = str(spec.home).replace("%", "%%") if spec.home else "%h/.codedeck"
        lines.append(f"EnvironmentFile=-{env_dir}/{ENV_FILE_NAME}")
    if spec.path is not None:
        lines.append(
            "# The PATH of the shell that ran `service install`: sessions find the same tools."
        )
        lines.append(f"Environment={_quote_assignment('PATH', spec.path)}")
    else:
        lines.append(
            "# Sessions see systemd's PATH; give them your tools' directories if they need them:"
        )
        home_hint = "/home/alice" if system else "%h"
        lines.append(f"#Environment=PATH={home_hint}/.local/bin:/usr/local/bin:/usr/bin:/bin")
    if spec.pythonpath is not None:
        lines.append("# A source checkout: where `python -m bridge` finds the package.")
        lines.append(f"Environment={_quote_assignment('PYTHONPATH', spec.pythonpath)}")
    lines.append("# The bridge key from a file outside the home: systemd hands it to the daemon as")
    lines.append(
        "# $CREDENTIALS_DIRECTORY/nsec, which then replaces the identity kept in the store."
    )
    if spec.credential is not None:
        lines.append(f"LoadCredential=nsec:{str(spec.credential).replace('%', '%%')}")
    else:
        lines.append("#LoadCredential=nsec:/path/to/bridge.nsec")
    lines.append("")
    lines.append(_HARDENING_COMMON.rstrip("\n"))
    if system:
        lines.append(_HARDENING_SYSTEM.rstrip("\n"))
        lines.append("# Deliberately absent:")
        lines.append(
            "# - ProtectHome=: the sessions work in the account's home (workspaces, ~/.claude)."
        )
        lines.append(
            "# - ProtectSystem=strict: the whole file system, the home included, would be read-only."
        )
        lines.append(
            "# - ProtectClock=, DeviceAllow=: a device allow-list would cut sessions off /dev/kvm,"
        )
        lines.append("#   GPUs and USB serial devices (emulators, CUDA, flashing boards).")
        lines.append(
            "# - ProtectControlGroups=: rootless containers and `systemd-run --user` need cgroups."
        )
    else:
        lines.append(_ABSENT_USER.rstrip("\n"))
    lines.append(_ABSENT_COMMON.rstrip("\n"))
    lines.append("")
    lines.append("[Install]")
    lines.append("WantedBy=multi-user.target" if system else "WantedBy=default.target")
    return "\n".join(lines) + "\n"
