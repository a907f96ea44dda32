"""The bridge as a systemd service: ``codedeck-bridge service install|uninstall|show``.

- `units`: the unit files (user unit, system template), rendered from a `UnitSpec`;
- `systemd`: this installation's command, writing/removing units, calling ``systemctl``;
- `command`: the CLI (``uninstall`` closes the sessions first, see there).
"""

from bridge.service.command import (
    SessionCloser,
    add_service_commands,
    close_every_session,
    run_service_command,
)
from bridge.service.systemd import (
    Outcome,
    ServiceError,
    Systemd,
    install,
    installation_command,
    uninstall,
    unit_directory,
)
from bridge.service.units import (
    ENV_FILE_NAME,
    GENERIC_SYSTEM_COMMAND,
    GENERIC_USER_COMMAND,
    MARKER,
    SYSTEM_ENV_DIR,
    SYSTEM_UNIT,
    USER_UNIT,
    Scope,
    UnitSpec,
    deploy_units,
    quote_arg,
    render_unit,
    unit_home,
)

__all__ = [
    "ENV_FILE_NAME",
    "GENERIC_SYSTEM_COMMAND",
    "GENERIC_USER_COMMAND",
    "MARKER",
    "SYSTEM_ENV_DIR",
    "SYSTEM_UNIT",
    "USER_UNIT",
    "Outcome",
    "Scope",
    "ServiceError",
    "SessionCloser",
    "Systemd",
    "UnitSpec",
    "add_service_commands",
    "close_every_session",
    "deploy_units",
    "install",
    "installation_command",
    "quote_arg",
    "render_unit",
    "run_service_command",
    "uninstall",
    "unit_directory",
    "unit_home",
]
