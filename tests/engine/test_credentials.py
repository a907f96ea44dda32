"""Credentials: tri-state merge of both fields, refusals, the effective key, the ack."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest

from bridge.engine.phones.credentials import (
    ANTHROPIC_KEY_NAME,
    GITHUB_PAT_NAME,
    MAX_CREDENTIAL_LENGTH,
    CredentialChange,
    Credentials,
    apply_set_credentials,
    credentials_ack,
    effective_anthropic_key,
)
from bridge.protocol import SetCredentialsCommand, decode_phone_to_bridge, encode

KEY = "sk-ant-api03-SECRETKEY"
NEW_KEY = "sk-ant-api03-NEWKEY"
PAT = "ghp_SECRETPAT123"
NEW_PAT = "ghp_NEWPAT456"
_ABSENT = object()


def command(key: object = _ABSENT, pat: object = _ABSENT) -> SetCredentialsCommand:
    payload: dict[str, Any] = {"type": "set-credentials"}
    if key is not _ABSENT:
        payload["anthropicApiKey"] = key
    if pat is not _ABSENT:
        payload["githubPat"] = pat
    decoded = decode_phone_to_bridge(json.dumps(payload))
    assert isinstance(decoded, SetCredentialsCommand)
    return decoded


# Every combination: stored value (None / set) × wire value (absent / null / new string), per field.
FIELD_CASES = [
    # (stored, wire, expected, change written)
    (None, _ABSENT, None, False),
    (None, None, None, True),
    (None, "NEW", "NEW", True),
    ("OLD", _ABSENT, "OLD", False),
    ("OLD", None, None, True),
    ("OLD", "NEW", "NEW", True),
]
COMBINATIONS = list(itertools.product(FIELD_CASES, FIELD_CASES))


def _concrete(value: Any, old: str, new: str) -> Any:
    return {"OLD": old, "NEW": new}.get(value, value) if isinstance(value, str) else value


@pytest.mark.parametrize(("key_case", "pat_case"), COMBINATIONS)
def test_tri_state_merge_in_every_combination(
    key_case: tuple[Any, ...], pat_case: tuple[Any, ...]
) -> None:
    k_stored, k_wire, k_expected, k_changed = (_concrete(v, KEY, NEW_KEY) for v in key_case)
    p_stored, p_wire, p_expected, p_changed = (_concrete(v, PAT, NEW_PAT) for v in pat_case)
    before = Credentials(anthropic_api_key=k_stored, github_pat=p_stored)
    outcome = apply_set_credentials(before, command(k_wire, p_wire))
    assert outcome.success and outcome.error is None
    assert outcome.credentials == Credentials(k_expected, p_expected)
    expected_changes = []
    if k_changed:
        expected_changes.append(CredentialChange(ANTHROPIC_KEY_NAME, k_expected))
    if p_changed:
        expected_changes.append(CredentialChange(GITHUB_PAT_NAME, p_expected))
    assert list(outcome.changes) == expected_changes


@pytest.mark.parametrize("blank", ["", "   ", "\n"], ids=["empty", "spaces", "newline"])
def test_a_blank_string_clears(blank: str) -> None:
    outcome = apply_set_credentials(Credentials(KEY, PAT), command(key=blank))
    assert outcome.credentials == Credentials(None, PAT)
    assert outcome.changes == (CredentialChange(ANTHROPIC_KEY_NAME, None),)


def test_surrounding_blanks_are_stripped() -> None:
    outcome = apply_set_credentials(Credentials(), command(key=f"  {NEW_KEY}\n"))
    assert outcome.credentials.anthropic_api_key == NEW_KEY


@pytest.mark.parametrize(
    ("key", "pat", "expected"),
    [
        ("sk ant", _ABSENT, "anthropicApiKey must be printable ASCII"),
        ("sk-ünï", _ABSENT, "anthropicApiKey must be printable ASCII"),
        (_ABSENT, "ghp\x00x", "githubPat must be printable ASCII"),
        ("k" * (MAX_CREDENTIAL_LENGTH + 1), _ABSENT, "anthropicApiKey is too long"),
        (NEW_KEY, "bad pat", "githubPat must be printable ASCII"),
    ],
    ids=["space", "unicode", "nul", "long", "one-bad-field-refuses-both"],
)
def test_bad_values_refuse_the_whole_command(key: Any, pat: Any, expected: str) -> None:
    before = Credentials(KEY, PAT)
    outcome = apply_set_credentials(before, command(key, pat))
    assert not outcome.success and outcome.error is not None and expected in outcome.error
    assert outcome.credentials == before and outcome.changes == ()
    for value in (key, pat):
        if isinstance(value, str):
            assert value not in outcome.error


@pytest.mark.parametrize(
    ("env", "stored", "expected"),
    [
        ("sk-env", KEY, "sk-env"),
        ("sk-env", None, "sk-env"),
        (None, KEY, KEY),
        ("", KEY, KEY),
        ("  ", KEY, KEY),
        (None, None, None),
    ],
    ids=["env-wins", "env-only", "stored", "empty-env", "blank-env", "none"],
)
def test_effective_key_prefers_the_environment(
    env: str | None, stored: str | None, expected: str | None
) -> None:
    assert effective_anthropic_key(env, Credentials(anthropic_api_key=stored)) == expected


@pytest.mark.parametrize("key_valid", [True, False, None], ids=["valid", "invalid", "unknown"])
def test_ack_reports_what_is_stored_and_the_tri_state_verdict(key_valid: bool | None) -> None:
    ack = json.loads(encode(credentials_ack("m", Credentials(KEY, None), key_valid=key_valid)))
    expected: dict[str, Any] = {
        "type": "credentials-ack",
        "machine": "m",
        "success": True,
        "hasAnthropicKey": True,
        "hasGithubPat": False,
    }
    if key_valid is not None:
        expected["keyValid"] = key_valid
    assert ack == expected


def test_refusal_ack_and_secrets_never_leak() -> None:
    creds = Credentials(KEY, PAT)
    refused = encode(credentials_ack("m", creds, success=False, error="githubPat must be ..."))
    assert json.loads(refused)["success"] is False
    outcome = apply_set_credentials(Credentials(), command(KEY, PAT))
    for text in (refused, repr(creds), repr(outcome), repr(command(KEY, PAT)), str(outcome)):
        assert KEY not in text and PAT not in text, text


def test_from_store_ignores_unknown_and_empty_rows() -> None:
    creds = Credentials.from_store({ANTHROPIC_KEY_NAME: KEY, GITHUB_PAT_NAME: "", "other": "x"})
    assert creds == Credentials(KEY, None)
    assert creds.has_anthropic_key and not creds.has_github_pat
