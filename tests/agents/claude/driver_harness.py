"""A session host in miniature, for the death-signal test: one ClaudeDriver on the fake CLI.

``python -m tests.agents.claude.driver_harness <cli_path> <cwd> <json env>`` starts the driver,
sends an input that makes the CLI ask for a permission, and never answers it: it prints
``ASKED`` once the prompt waits, then waits to be killed.
"""

from __future__ import annotations

import asyncio
import json
import sys
import uuid

from bridge.agents.claude import ClaudeDriver
from bridge.host.driver import DriverSpec
from bridge.host.events import Ready
from tests.host.fakes import FakeServices


async def main(cli_path: str, cwd: str, env: dict[str, str]) -> None:
    services = FakeServices()
    spec = DriverSpec(str(uuid.uuid4()), cwd, env=env, options={"cli_path": cli_path})
    driver = ClaudeDriver(spec, services)
    run = asyncio.ensure_future(driver.run())
    await services.wait_event(Ready)
    driver.send_input("u1", "tool:Bash")
    await services.next_ask()
    print("ASKED", flush=True)
    await run


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], json.loads(sys.argv[3])))
