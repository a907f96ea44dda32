"""The phones and what they keep on the bridge.

``paired`` is who may command the bridge and who hears it; ``pairing`` the pairing window and the
budget of negative answers; ``accounts`` the settings commands, over ``providers`` (custom
provider profiles), ``credentials`` (API key, GitHub token) and ``device_config``.
"""

__all__: list[str] = []
