"""PROTOCOL.md lists exactly the message types of the schema (PROTOCOL.md §7).

A type literal of either union missing from the message reference fails, and so does a type the
reference names that the schema lacks, or a type filed under the wrong direction.
"""

from __future__ import annotations

import re
from pathlib import Path

from bridge.protocol import (
    ALL_BRIDGE_CAPABILITIES,
    BASE_URL_ERROR,
    BRIDGE_TO_PHONE_TYPES,
    PHONE_TO_BRIDGE_TYPES,
)

DOC = (Path(__file__).resolve().parents[2] / "PROTOCOL.md").read_text(encoding="utf-8")


def section(heading: str) -> str:
    """The text under a heading, up to the next heading of the same or a higher level."""
    match = re.search(rf"^(#+) {re.escape(heading)}\s*$", DOC, flags=re.MULTILINE)
    assert match, f"PROTOCOL.md has no heading {heading!r}"
    level = len(match.group(1))
    rest = DOC[match.end() :]
    end = re.search(rf"^#{{1,{level}}} ", rest, flags=re.MULTILINE)
    return rest[: end.start()] if end else rest


def table_types(text: str) -> list[str]:
    """The backticked type literal that starts each row of the markdown tables in ``text``."""
    types = []
    for line in text.splitlines():
        match = re.match(r"^\|\s*`([^`]+)`", line)
        if match:
            types.append(match.group(1))
    return types


REFERENCE = section("7. Message reference")
COMMANDS = table_types(section("Phone → bridge commands (all kind 4515)"))
MESSAGES = table_types(section("Bridge → phone messages"))


def test_every_command_type_is_documented_and_nothing_else() -> None:
    assert set(COMMANDS) == set(PHONE_TO_BRIDGE_TYPES)
    assert COMMANDS.count("upload-image") == 2  # both shapes have a row


def test_every_message_type_is_documented_and_nothing_else() -> None:
    assert set(MESSAGES) == set(BRIDGE_TO_PHONE_TYPES)
    assert len(MESSAGES) == len(BRIDGE_TO_PHONE_TYPES)


def test_the_reference_names_no_type_the_schema_lacks() -> None:
    named = set(table_types(REFERENCE))
    assert named <= set(PHONE_TO_BRIDGE_TYPES) | set(BRIDGE_TO_PHONE_TYPES)


def test_other_facts_the_doc_states_match_the_code() -> None:
    assert BASE_URL_ERROR in DOC
    capabilities = table_types(section("12. Capabilities"))
    assert tuple(capabilities) == ALL_BRIDGE_CAPABILITIES
    for heading in (
        "4. Subscriptions and their `since` rules (the bug-A contract)",
        "15. Session-list truthfulness (the bug-B contract)",
        "10. Oversize fragmentation (`chunk`)",
        "11. Transcript sync",
        "13. Custom provider profiles",
    ):
        assert section(heading).strip()
