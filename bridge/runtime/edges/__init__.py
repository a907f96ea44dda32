"""The daemon's edges to the machine, beside the relays: what it serves and whom it tells.

``control_handler`` and ``control_tasks`` answer the local control socket (the CLI and the
editor); ``embedded_relay`` runs the built-in relay; ``registration`` registers with a private
relay's admin API; ``sdnotify`` speaks systemd's notify protocol; ``wake`` notices a resume from
suspend.
"""

__all__: list[str] = []
