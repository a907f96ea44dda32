"""Issue 5 through the real daemon and a real relay: provider profiles, credentials, device config,
GSD state and image uploads, driven by the phone simulator.

Every daemon here runs with ``--log-level DEBUG`` (a secret must not appear at any level), with
``ANTHROPIC_BASE_URL`` pointing at a local probe target (so no key probe ever leaves 127.0.0.1),
``ANTHROPIC_API_KEY`` blank (the stored key is the effective one unless a test sets it) and an
empty ``CLAUDE_CONFIG_DIR`` (GSD detection depends only on the projects the test builds).

The probe target answers by behaviour name (:func:`tests.support.settings_harness.probe_reply`):
a provider's ``baseUrl`` ``…/ok/<id>`` gets 200, ``…/unauthorized/…`` 401, ``…/forbidden/…``
403, ``…/broken/…`` 500 and ``…/hang/…`` nothing at all; an API key ``sk-<behaviour>-…`` picks
the answer of the key probe the same way.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import shutil
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from pydantic import ValidationError

from bridge.protocol import (
    BASE_URL_ERROR,
    KEEP,
    DeviceConfig,
    GsdRequestCommand,
    RefreshSessionsCommand,
    SetCredentialsCommand,
    SetDeviceConfigCommand,
    SetProviderProfileCommand,
)
from bridge.protocol.primitives import Keep
from bridge.runtime.errands.probes import KEY_PROBE_MODEL
from store import accounts as accounts_store
from store.db import open_bridge_db
from tests.support.daemon import DaemonProcess
from tests.support.http_servers import LocalHttpServer, Reply, make_tls
from tests.support.phone import PhoneSimulator
from tests.support.relay import LoopbackRelay
from tests.support.settings_harness import (
    WAIT,
    PhonePair,
    assert_secrets_kept,
    create_session,
    echo_round_trip,
    make_secret,
    probe_reply,
    profiles,
    query_db,
    raw_profile,
    session_fails,
    set_credentials,
    set_profile,
    stored_profile,
    wait_for_log,
    write,
)
from tests.support.upload_builders import (
    PNG,
    blossom_upload,
    check_saved,
    chunk,
    chunks_of,
    injected,
    saved_files,
    seal,
    wait_injected,
)

MACHINE = "testbox"
MIB = 1024 * 1024

DaemonFactory = Callable[..., Awaitable[DaemonProcess]]


# --- fixtures -------------------------------------------------------------------------------------


@pytest.fixture
async def probe_server() -> AsyncIterator[LocalHttpServer]:
    async with LocalHttpServer(probe_reply) as server:
        yield server


@pytest.fixture
async def pairs(relay: LoopbackRelay) -> AsyncIterator[PhonePair]:
    paired = PhonePair(relay.url)
    try:
        yield paired
    finally:
        await paired.close()


@pytest.fixture
async def start_daemon(
    relay: LoopbackRelay, tmp_path: Path, workspace: Path, probe_server: LocalHttpServer
) -> AsyncIterator[DaemonFactory]:
    """``await start_daemon(env=…)`` → a running daemon on ``<tmp>/home``, stopped at teardown."""
    claude_dir = tmp_path / "claude-config"
    claude_dir.mkdir()
    started: list[DaemonProcess] = []

    async def start(env: dict[str, str] | None = None) -> DaemonProcess:
        daemon = DaemonProcess(
            tmp_path / "home",
            [relay.url],
            workspace,
            machine=MACHINE,
            extra_args=["--log-level", "DEBUG"],
            env={
                "CODEDECK_AGENT": "scripted",  # the echo agent: injected inputs come back
                "ANTHROPIC_API_KEY": "",
                "ANTHROPIC_BASE_URL": f"{probe_server.origin}/key",
                "CLAUDE_CONFIG_DIR": str(claude_dir),
                **(env or {}),
            },
        )
        started.append(daemon)
        await daemon.start()
        return daemon

    try:
        yield start
    finally:
        for daemon in started:
            if daemon.running:
                try:
                    await daemon.stop()
                except subprocess.TimeoutExpired:
                    daemon.kill()


@dataclass
class Blossom:
    """An https Blossom server the daemon trusts (through ``SSL_CERT_FILE``)."""

    server: LocalHttpServer
    ca_pem: Path
    routes: dict[str, Reply] = field(default_factory=dict)

    def put(self, path: str, reply: Reply) -> str:
        self.routes[path] = reply
        return f"{self.server.origin}{path}"


@pytest.fixture
async def blossom(tmp_path: Path) -> AsyncIterator[Blossom]:
    tls = make_tls(tmp_path / "tls")
    routes: dict[str, Reply] = {}
    server = LocalHttpServer(lambda r: routes.get(r.path, Reply(404)), tls=tls.server_context)
    async with server:
        yield Blossom(server, tls.ca_pem, routes)


# --- provider profiles ----------------------------------------------------------------------------


async def test_profile_replies_go_to_the_sender_and_the_list_to_every_phone(
    start_daemon: DaemonFactory, pairs: PhonePair, probe_server: LocalHttpServer
) -> None:
    daemon = await start_daemon()
    alice = await pairs.pair(daemon, "Alice")
    bob = await pairs.pair(daemon, "Bob")
    base_url = f"{probe_server.origin}/ok/kimi"
    beat = alice.messages("sessions")[-1].message
    assert {"custom-providers", "gsd", "images"} <= set(beat.capabilities or [])
    assert "device-actions" not in (beat.capabilities or [])

    b0 = bob.mark()
    ack, listing = await set_profile(
        alice, "kimi", write(base_url, models=("kimi-k3", "kimi-k3-pro"), default_model="kimi-k3")
    )
    assert ack.message.model_dump(exclude_none=True) == {
        "type": "provider-profile-ack",
        "machine": MACHINE,
        "profileId": "kimi",
        "success": True,
    }
    assert listing is not None and listing.index > ack.index  # the ack first, then the list
    bob_listing = await bob.wait_for("provider-profiles", after=b0, timeout=WAIT)
    for received in (listing, bob_listing):
        assert [p.model_dump(exclude_none=True) for p in received.message.profiles] == [
            {
                "id": "kimi",
                "label": "Kimi",
                "baseUrl": base_url,
                "models": [{"id": "kimi-k3"}, {"id": "kimi-k3-pro"}],
                "defaultModel": "kimi-k3",
                "hasToken": False,
            }
        ]
        assert received.message.machine == MACHINE
    assert bob.count("provider-profile-ack", after=b0) == 0
    assert probe_server.requests == []  # no token: nothing to probe

    # provider-profiles-request: the requester only.
    a1, b1 = alice.mark(), bob.mark()
    assert list(await profiles(bob)) == ["kimi"]
    assert list(await profiles(alice)) == ["kimi"]
    await alice.quiesce(0.3)
    assert alice.count("provider-profiles", after=a1) == 1
    assert bob.count("provider-profiles", after=b1) == 1

    # A delete (profile: null) from the other phone: its ack, then the empty list to both.
    a2, b2 = alice.mark(), bob.mark()
    ack, listing = await set_profile(bob, "kimi", None)
    assert ack.message.success and ack.message.error is None and ack.message.tokenValid is None
    assert listing is not None and listing.message.profiles == []
    alice_listing = await alice.wait_for("provider-profiles", after=a2, timeout=WAIT)
    assert alice_listing.message.profiles == []
    assert alice.count("provider-profile-ack", after=a2) == 0
    assert bob.count("provider-profile-ack", after=b2) == 1
    assert stored_profile(daemon, "kimi") is None

    # A delete of an id that never existed: acked, and (nothing changed) no list broadcast
    # (wire spec §6 row 23: the list goes to all phones "after any change").
    a3, b3 = alice.mark(), bob.mark()
    await alice.send(SetProviderProfileCommand(profileId="ghost", profile=None))
    ghost = await alice.wait_for("provider-profile-ack", after=a3, timeout=WAIT)
    assert (ghost.message.profileId, ghost.message.success, ghost.message.error) == (
        "ghost",
        True,
        None,
    )
    assert await profiles(bob) == {}
    assert await profiles(alice) == {}
    await alice.quiesce(0.3)
    assert alice.count("provider-profiles", after=a3) == 1  # its own request's answer only
    assert bob.count("provider-profiles", after=b3) == 1
    assert bob.count("provider-profile-ack", after=b3) == 0

    # credentials-ack: the sender only.
    pat = make_secret("pat")
    b4 = bob.mark()
    creds = await set_credentials(alice, githubPat=pat)
    assert (creds.success, creds.hasGithubPat, creds.hasAnthropicKey, creds.keyValid) == (
        True,
        True,
        False,
        None,
    )
    assert await profiles(bob) == {}
    assert bob.count("credentials-ack", after=b4) == 0
    assert alice.violations == [] and bob.violations == [] and alice.errors == []
    assert_secrets_kept(daemon, pairs, [pat])


TOKEN_CASES = [
    # (case, a token stored before, the command's authToken, hasToken after, token probed)
    ("absent-on-none", False, "absent", False, None),
    ("null-on-none", False, "null", False, None),
    ("string-on-none", False, "new", True, "new"),
    ("absent-keeps", True, "absent", True, "old"),
    ("null-clears", True, "null", False, None),
    ("string-replaces", True, "new", True, "new"),
]


async def test_auth_token_tri_state_in_every_combination(
    start_daemon: DaemonFactory, pairs: PhonePair, probe_server: LocalHttpServer
) -> None:
    daemon = await start_daemon()
    phone = await pairs.pair(daemon)
    used: list[str] = []
    for case, stored_before, command_token, has_token, probed in TOKEN_CASES:
        base_url = f"{probe_server.origin}/ok/{case}/"
        old, new = make_secret(), make_secret()
        used += [old, new]
        if stored_before:
            ack, _ = await set_profile(phone, case, write(base_url, token=old))
            assert ack.message.tokenValid is True, case
        token: str | Keep | None = {"absent": KEEP, "null": None, "new": new}[command_token]
        before = len(probe_server.requests_to(f"/ok/{case}/"))
        ack, listing = await set_profile(phone, case, write(base_url, label=case, token=token))
        assert ack.message.success, (case, ack.message)
        assert listing is not None
        (info,) = [p for p in listing.message.profiles if p.id == case]
        assert (info.label, info.hasToken) == (case, has_token), case
        requests = probe_server.requests_to(f"/ok/{case}/")
        record = stored_profile(daemon, case)
        assert record is not None
        if probed is None:
            assert ack.message.tokenValid is None, case  # no token: no probe, no verdict
            assert len(requests) == before, case
            assert "authToken" not in record, case
        else:
            expected = {"old": old, "new": new}[probed]
            assert ack.message.tokenValid is True, case
            assert len(requests) == before + 1, case
            assert requests[-1].headers["authorization"] == f"Bearer {expected}", case
            assert record["authToken"] == expected, case
    listed = await profiles(phone)
    assert {k: v.hasToken for k, v in listed.items()} == {c[0]: c[3] for c in TOKEN_CASES}

    # A token that cannot be a credential: refused with a reason, nothing stored or probed.
    bad = "sk-with space-" + make_secret()
    used.append(bad)
    before = len(probe_server.requests)
    base_url = f"{probe_server.origin}/ok/bad"
    ack, listing = await set_profile(phone, "bad", write(base_url, token=bad))
    assert (ack.message.success, ack.message.tokenValid, listing) == (False, None, None)
    assert ack.message.error == "the auth token must be printable ASCII without spaces"
    assert stored_profile(daemon, "bad") is None and len(probe_server.requests) == before
    assert "bad" not in await profiles(phone)
    assert_secrets_kept(daemon, pairs, used)


async def test_https_rule_on_write(
    start_daemon: DaemonFactory, pairs: PhonePair, probe_server: LocalHttpServer
) -> None:
    daemon = await start_daemon()
    phone = await pairs.pair(daemon)
    port = probe_server.port
    tokens = {name: make_secret() for name in ("by-name", "by-v4", "any", "sub", "remote")}

    # Accepted over http: the loopback names, exactly.
    ack, _ = await set_profile(
        phone, "by-name", write(f"http://localhost:{port}/ok/by-name", token=tokens["by-name"])
    )
    assert ack.message.success and ack.message.tokenValid is True
    ack, _ = await set_profile(
        phone, "by-v4", write(f"http://127.0.0.1:{port}/ok/by-v4", token=tokens["by-v4"])
    )
    assert ack.message.success and ack.message.tokenValid is True
    # Without a token (nothing listens on [::1] here, and https://llm.example is not ours).
    no_token = {
        "by-v6": f"http://[::1]:{port}/ok/by-v6",
        "by-v6-long": f"http://[0:0:0:0:0:0:0:1]:{port}/ok/by-v6-long",
        "by-name-caps": f"HTTP://LocalHost:{port}/ok/by-name-caps",
        "tls": "https://llm.example/anthropic",
    }
    for name, url in no_token.items():
        ack, _ = await set_profile(phone, name, write(url))
        assert ack.message.success and ack.message.error is None, name
    authorizations = [r.headers["authorization"] for r in probe_server.requests]
    assert authorizations == [f"Bearer {tokens['by-name']}", f"Bearer {tokens['by-v4']}"]

    # Refused: 0.0.0.0, a *.localhost name, plain http elsewhere. The codec will not even encode
    # them, so they go out as hand-written JSON; the bridge drops them at decode, without an ack.
    refused = {
        "any": f"http://0.0.0.0:{port}/ok/any",
        "sub": f"http://app.localhost:{port}/ok/sub",
        "remote": f"http://llm.example:{port}/ok/remote",
    }
    mark = phone.mark()
    for name, url in refused.items():
        with pytest.raises(ValidationError, match=re.escape(BASE_URL_ERROR)):
            write(url, token=tokens[name])
        await phone.send_raw(raw_profile(name, url, tokens[name]))
    await wait_for_log(daemon, f"profile.baseUrl {BASE_URL_ERROR}", count=len(refused))
    listed = await profiles(phone)
    assert sorted(listed) == sorted(["by-name", "by-v4", *no_token])
    assert phone.count("provider-profile-ack", after=mark) == 0
    assert len(probe_server.requests) == 2  # 0.0.0.0 would have reached it: never probed
    for name in refused:
        assert stored_profile(daemon, name) is None
    assert_secrets_kept(daemon, pairs, tokens.values())


async def test_legacy_insecure_profile_is_listed_deletable_and_never_used(
    start_daemon: DaemonFactory,
    pairs: PhonePair,
    probe_server: LocalHttpServer,
    tmp_path: Path,
) -> None:
    port = probe_server.port
    legacy = {
        "legacy-any": (f"http://0.0.0.0:{port}/ok/legacy-any", "Legacy Any", make_secret()),
        "legacy-sub": (f"http://app.localhost:{port}/ok/legacy-sub", "Legacy Sub", make_secret()),
    }
    db = await open_bridge_db(tmp_path / "home")  # rows an older bridge wrote
    try:
        for profile_id, (url, label, token) in legacy.items():
            record = {
                "id": profile_id,
                "label": label,
                "baseUrl": url,
                "authToken": token,
                "models": [{"id": "old-model"}],
            }
            await accounts_store.save_provider_profile(db, profile_id, record)
    finally:
        await db.close()
    daemon = await start_daemon()
    phone = await pairs.pair(daemon)

    listed = await profiles(phone)
    assert {k: (v.baseUrl, v.label, v.hasToken) for k, v in listed.items()} == {
        k: (url, label, True) for k, (url, label, _) in legacy.items()
    }

    reason = await session_fails(phone, providerId="legacy-any")
    assert reason == f'provider profile "Legacy Any" cannot be used: {BASE_URL_ERROR}'
    reason = await session_fails(phone, providerId="legacy-sub", model="old-model")
    assert BASE_URL_ERROR in reason and "Legacy Sub" in reason
    assert probe_server.requests == []  # the token never went anywhere

    # Fixed by the phone (secure URL, token kept): now probed with the kept token.
    ack, _ = await set_profile(
        phone, "legacy-sub", write(f"http://127.0.0.1:{port}/ok/fixed", label="Legacy Sub")
    )
    assert ack.message.success and ack.message.tokenValid is True
    (probe,) = probe_server.requests
    assert probe.path == "/ok/fixed/v1/messages"
    assert probe.headers["authorization"] == f"Bearer {legacy['legacy-sub'][2]}"

    # A delete is always allowed.
    ack, listing = await set_profile(phone, "legacy-any", None)
    assert ack.message.success and ack.message.error is None
    assert listing is not None and [p.id for p in listing.message.profiles] == ["legacy-sub"]
    assert stored_profile(daemon, "legacy-any") is None
    assert len(probe_server.requests) == 1
    assert_secrets_kept(daemon, pairs, [token for _, _, token in legacy.values()])


async def test_probe_verdicts_200_401_403_500_and_no_answer(
    start_daemon: DaemonFactory, pairs: PhonePair, probe_server: LocalHttpServer
) -> None:
    daemon = await start_daemon()
    phone = await pairs.pair(daemon)
    origin = probe_server.origin
    used: list[str] = []

    # The key probe: x-api-key, the smallest model, max_tokens 1; the verdict by status.
    verdicts = [("ok", True), ("unauthorized", False), ("forbidden", False), ("broken", True)]
    for behaviour, verdict in verdicts:
        key = make_secret(behaviour)
        used.append(key)
        ack = await set_credentials(phone, anthropicApiKey=key)
        assert (ack.success, ack.hasAnthropicKey, ack.keyValid) == (True, True, verdict), behaviour
        request = probe_server.requests[-1]
        assert (request.method, request.path) == ("POST", "/key/v1/messages")
        assert request.headers["x-api-key"] == key and "authorization" not in request.headers
        assert request.headers["anthropic-version"]
        body = request.json()
        assert (body["model"], body["max_tokens"]) == (KEY_PROBE_MODEL, 1)

    # Nobody answers: the provider probe and the key probe both hang (the probe timeout, 10 s,
    # once for both) while the daemon goes on answering everything else.
    hang_key, hang_token = make_secret("hang"), make_secret("hang")
    used += [hang_key, hang_token]
    mark = phone.mark()
    await phone.send(
        SetProviderProfileCommand(
            profileId="p-hang", profile=write(f"{origin}/hang/p-hang", token=hang_token)
        )
    )
    await phone.send(SetCredentialsCommand(anthropicApiKey=hang_key))
    await probe_server.wait_for_requests("/hang/", 1)
    await probe_server.wait_for_requests("/key/", 5)
    listed = await profiles(phone)
    assert listed["p-hang"].hasToken  # stored before the probe; the command loop is free

    cases = [
        ("p-ok", "ok", True, "kimi-k3-pro"),
        ("p-unauthorized", "unauthorized", False, None),
        ("p-forbidden", "forbidden", False, None),
        ("p-broken", "broken", True, None),
    ]
    for profile_id, behaviour, verdict, default_model in cases:
        token = make_secret()
        used.append(token)
        base_url = f"{origin}/{behaviour}/{profile_id}/"  # the trailing / is dropped
        ack, _ = await set_profile(
            phone,
            profile_id,
            write(
                base_url,
                token=token,
                models=("kimi-k3", "kimi-k3-pro"),
                default_model=default_model,
            ),
        )
        assert ack.message.tokenValid is verdict, profile_id
        (request,) = probe_server.requests_to(f"/{behaviour}/{profile_id}/")
        assert (request.method, request.path) == ("POST", f"/{behaviour}/{profile_id}/v1/messages")
        assert request.headers["authorization"] == f"Bearer {token}"
        assert "x-api-key" not in request.headers
        body = request.json()
        assert (body["model"], body["max_tokens"]) == (default_model or "kimi-k3", 1)
    assert phone.count("provider-profile-ack", lambda m: m.profileId == "p-hang", after=mark) == 0

    hung = await phone.wait_for(
        "provider-profile-ack", lambda m: m.profileId == "p-hang", after=mark, timeout=WAIT
    )
    assert hung.message.success and hung.message.tokenValid is None
    creds = await phone.wait_for("credentials-ack", after=mark, timeout=WAIT)
    assert creds.message.success and creds.message.hasAnthropicKey
    assert creds.message.keyValid is None
    await wait_for_log(daemon, "timed out", count=2)
    assert_secrets_kept(daemon, pairs, used)


# --- credentials ----------------------------------------------------------------------------------


async def test_credentials_tri_state_in_every_combination(
    start_daemon: DaemonFactory, pairs: PhonePair, probe_server: LocalHttpServer
) -> None:
    daemon = await start_daemon()
    phone = await pairs.pair(daemon)
    k1, k2, k3, k4 = make_secret(), make_secret(), make_secret(), make_secret()
    p1, p2, p3 = make_secret("pat"), make_secret("pat"), make_secret("pat")
    bad = "sk-bad key-" + make_secret()
    steps: list[tuple[dict[str, Any], bool, bool, str | None]] = [
        # (command fields, hasAnthropicKey, hasGithubPat, the key probed)
        ({}, False, False, None),
        ({"anthropicApiKey": None, "githubPat": None}, False, False, None),
        ({"anthropicApiKey": k1}, True, False, k1),
        ({"githubPat": p1}, True, True, None),
        ({}, True, True, None),
        ({"anthropicApiKey": None}, False, True, None),
        ({"anthropicApiKey": k2, "githubPat": None}, True, False, k2),
        ({"githubPat": p2, "anthropicApiKey": None}, False, True, None),
        ({"anthropicApiKey": k3, "githubPat": p3}, True, True, k3),
        ({"githubPat": None}, True, False, None),
        ({"anthropicApiKey": k4}, True, False, k4),
    ]
    for fields, has_key, has_pat, probed in steps:
        before = len(probe_server.requests)
        ack = await set_credentials(phone, **fields)
        label = sorted(fields.items(), key=lambda kv: kv[0])
        assert (ack.machine, ack.success, ack.error) == (MACHINE, True, None), label
        assert (ack.hasAnthropicKey, ack.hasGithubPat) == (has_key, has_pat), label
        if probed is None:
            assert ack.keyValid is None and len(probe_server.requests) == before, label
        else:
            assert ack.keyValid is True and len(probe_server.requests) == before + 1, label
            assert probe_server.requests[-1].headers["x-api-key"] == probed
    stored = dict(query_db(daemon.home, "SELECT name, value FROM credentials"))
    assert stored == {"anthropicApiKey": k4}

    # A value that cannot be a credential refuses the whole command: nothing changes.
    ack = await set_credentials(phone, anthropicApiKey=bad, githubPat=p1)
    assert (ack.success, ack.hasAnthropicKey, ack.hasGithubPat) == (False, True, False)
    assert ack.error == "anthropicApiKey must be printable ASCII without spaces"
    assert dict(query_db(daemon.home, "SELECT name, value FROM credentials")) == stored
    assert_secrets_kept(daemon, pairs, [k1, k2, k3, k4, p1, p2, p3, bad])


async def test_the_environment_key_is_the_one_probed(
    start_daemon: DaemonFactory, pairs: PhonePair, probe_server: LocalHttpServer
) -> None:
    env_key, stored_key = make_secret("ok"), make_secret("unauthorized")
    daemon = await start_daemon(env={"ANTHROPIC_API_KEY": env_key})
    phone = await pairs.pair(daemon)
    ack = await set_credentials(phone, anthropicApiKey=stored_key)
    assert (ack.success, ack.hasAnthropicKey, ack.keyValid) == (True, True, True)
    (request,) = probe_server.requests
    assert request.headers["x-api-key"] == env_key
    assert dict(query_db(daemon.home, "SELECT name, value FROM credentials")) == {
        "anthropicApiKey": stored_key
    }
    assert_secrets_kept(daemon, pairs, [env_key, stored_key])


# --- device config --------------------------------------------------------------------------------


async def test_device_config_is_kept_per_phone_without_transport_fields(
    start_daemon: DaemonFactory, pairs: PhonePair
) -> None:
    daemon = await start_daemon()
    alice = await pairs.pair(daemon, "Alice")
    bob = await pairs.pair(daemon, "Bob")

    def stored() -> dict[str, dict[str, Any]]:
        rows = query_db(daemon.home, "SELECT phone, config FROM device_config")
        return {phone: json.loads(config) for phone, config in rows}

    full = DeviceConfig(
        label="Pixel 8",
        role="test-target",
        serial="38011FDJH00ABC",
        meshIp="100.64.0.7",
        meshPubkey="mesh-pubkey-abc",
        appUnderTest="custom",
        customPackage="com.example.app",
        customBuildCmd="./gradlew installDebug",
        projectDir="/home/dev/app",
    )
    a0, b0 = alice.mark(), bob.mark()
    ack = await alice.request(
        SetDeviceConfigCommand(config=full), "device-config-ack", timeout=WAIT
    )
    assert ack.message.model_dump(exclude_none=True) == {
        "type": "device-config-ack",
        "success": True,
    }
    expected_alice = full.model_dump(exclude_none=True)
    del expected_alice["meshIp"], expected_alice["meshPubkey"]
    assert stored() == {alice.pubkey: expected_alice}

    refused = DeviceConfig(label="Tab", appUnderTest="kubo", projectDir="relative/dir")
    ack = await bob.request(
        SetDeviceConfigCommand(config=refused), "device-config-ack", timeout=WAIT
    )
    assert (ack.message.success, ack.message.error) == (
        False,
        "projectDir must be an absolute path",
    )
    assert stored() == {alice.pubkey: expected_alice}

    tablet = DeviceConfig(label="Tab", appUnderTest="kubo", meshIp="100.64.0.9")
    ack = await bob.request(
        SetDeviceConfigCommand(config=tablet), "device-config-ack", timeout=WAIT
    )
    assert ack.message.success and ack.message.error is None
    replaced = DeviceConfig(label="Pixel 8", appUnderTest="veil", meshPubkey="other")
    ack = await alice.request(
        SetDeviceConfigCommand(config=replaced), "device-config-ack", timeout=WAIT
    )
    assert ack.message.success
    assert stored() == {
        alice.pubkey: {"label": "Pixel 8", "appUnderTest": "veil"},
        bob.pubkey: {"label": "Tab", "appUnderTest": "kubo"},
    }
    await alice.quiesce(0.3)
    assert alice.count("device-config-ack", after=a0) == 2
    assert bob.count("device-config-ack", after=b0) == 2


# --- create-session on a provider -----------------------------------------------------------------


async def test_create_session_provider_checks_and_heartbeat(
    start_daemon: DaemonFactory, pairs: PhonePair, probe_server: LocalHttpServer
) -> None:
    daemon = await start_daemon()
    phone = await pairs.pair(daemon)
    token = make_secret()
    origin = probe_server.origin

    reason = await session_fails(phone, providerId="nope")
    assert reason == 'provider profile "nope" does not exist (it may have been deleted)'

    await set_profile(phone, "tokenless", write(f"{origin}/ok/tokenless", label="No Token"))
    reason = await session_fails(phone, providerId="tokenless")
    assert reason.startswith('provider profile "No Token" has no auth token')

    ack, _ = await set_profile(
        phone,
        "kimi",
        write(f"{origin}/ok/kimi", token=token, models=("k3", "k3-pro"), default_model="k3-pro"),
    )
    assert ack.message.tokenValid is True
    reason = await session_fails(phone, providerId="kimi", model="claude-opus-4")
    assert reason == 'model "claude-opus-4" is not offered by provider profile "Kimi"'

    session = await create_session(phone, providerId="kimi")
    beat = await phone.wait_for(
        "sessions", lambda m: any(s.id == session for s in m.sessions), timeout=WAIT
    )
    (info,) = [s for s in beat.message.sessions if s.id == session]
    assert (info.providerId, info.providerLabel, info.model) == ("kimi", "Kimi", "k3-pro")
    await echo_round_trip(phone, session, "hello provider")

    # The label follows the profile, and falls back to the id once the profile is deleted.
    await set_profile(phone, "kimi", write(f"{origin}/ok/kimi", label="Kimi 2", models=("k3",)))
    mark = phone.mark()
    await phone.send(RefreshSessionsCommand())
    beat = await phone.wait_for("sessions", after=mark, timeout=WAIT)
    (info,) = [s for s in beat.message.sessions if s.id == session]
    assert (info.providerId, info.providerLabel) == ("kimi", "Kimi 2")
    await set_profile(phone, "kimi", None)
    mark = phone.mark()
    await phone.send(RefreshSessionsCommand())
    beat = await phone.wait_for("sessions", after=mark, timeout=WAIT)
    (info,) = [s for s in beat.message.sessions if s.id == session]
    assert (info.providerId, info.providerLabel) == ("kimi", "kimi")

    # The profile is looked up again on resume: after a restart the session cannot run.
    mark = phone.mark()
    await daemon.stop()
    daemon = await start_daemon()
    died = await phone.wait_for(
        "output",
        lambda m: m.sessionId == session and m.entry.entryType == "error",
        after=mark,
        timeout=WAIT,
    )
    assert died.message.entry.content == (
        "Session could not be resumed: "
        'provider profile "kimi" does not exist (it may have been deleted)'
    )
    assert_secrets_kept(daemon, pairs, [token])


# --- GSD ------------------------------------------------------------------------------------------

ROADMAP = """# Roadmap: Demo

## Milestones

- 🚧 **v1.0 First Release** - Phases 1-2 (in progress)

## Phases

- [x] **Phase 1: Setup** - scaffolding
- [ ] **Phase 2: Build** - the thing

### Phase 1: Setup
**Goal**: a skeleton
**Depends on**: Nothing
**Plans**: 1 plans

### Phase 2: Build
**Goal**: the thing
**Depends on**: Phase 1
**Plans**: 2 plans
"""

STATE = """# Project State

Phase: 2 of 2 (Build)
Status: In progress

### Blockers/Concerns
- Waiting on API access
"""


def gsd_project(directory: Path, *, planning: bool) -> Path:
    """A git project with the GSD tooling installed in its ``.claude``; a plan if asked."""
    (directory / ".git").mkdir(parents=True)
    tool = directory / ".claude" / "get-shit-done"
    tool.mkdir(parents=True)
    (tool / "VERSION").write_text("1.9.0\n")
    if planning:
        phases = directory / ".planning" / "phases"
        for name, files in {
            "01-setup": ("01-01-PLAN.md", "01-01-SUMMARY.md"),
            "02-build": ("02-01-PLAN.md", "02-01-SUMMARY.md", "02-02-PLAN.md"),
        }.items():
            (phases / name).mkdir(parents=True)
            for file in files:
                (phases / name / file).write_text("plan\n")
        (directory / ".planning" / "ROADMAP.md").write_text(ROADMAP)
        (directory / ".planning" / "STATE.md").write_text(STATE)
    return directory


async def gsd(phone: PhoneSimulator, session: str) -> Any:
    reply = await phone.request(
        GsdRequestCommand(sessionId=session),
        "gsd-state",
        lambda m: m.sessionId == session,
        timeout=WAIT,
    )
    return reply.message.gsd


async def test_gsd_state_for_known_sessions_only(
    start_daemon: DaemonFactory, pairs: PhonePair, workspace: Path
) -> None:
    (workspace / "plain").mkdir()
    gsd_project(workspace / "planned", planning=True)
    gsd_project(workspace / "unplanned", planning=False)
    daemon = await start_daemon()
    phone = await pairs.pair(daemon)
    tablet = await pairs.pair(daemon, "Tablet")
    plain = await create_session(phone, cwd=str(workspace / "plain"))
    planned = await create_session(phone, cwd=str(workspace / "planned"))
    unplanned = await create_session(phone, cwd=str(workspace / "unplanned"))

    state = await gsd(phone, plain)
    on_path = shutil.which("gsd-tools") is not None
    assert (state.available, state.installed, state.hasGit) == (False, on_path, False)
    assert state.situation == ("No GSD project in this folder" if on_path else "GSD is not set up")
    assert (state.phases, state.actions, state.execution) == ([], [], None)

    state = await gsd(phone, unplanned)
    assert (state.available, state.installed, state.hasGit) == (False, True, True)
    assert state.situation == "No GSD project in this folder"
    assert "/gsd-new-project" in state.summary

    state = await gsd(phone, planned)
    assert (state.available, state.installed, state.hasGit) == (True, True, True)
    assert state.milestone == "v1.0 First Release"
    assert (state.currentPhase, state.totalPhases, state.percent) == ("2", 2, 67)
    assert [(p.number, p.name, p.diskStatus) for p in state.phases] == [
        ("1", "Setup", "complete"),
        ("2", "Build", "partial"),
    ]
    assert state.situation == "Executing phase 2 (Build): 1 of 2 plans done"
    assert state.recommended == "/gsd-execute-phase 2"
    assert state.blockers == ["Waiting on API access"]
    assert state.execution is not None and state.execution.currentPlan == "02-02"
    # gsd-state goes to every phone (wire spec §6 row 18), not only the requester.
    seen = await tablet.wait_for("gsd-state", lambda m: m.sessionId == planned, timeout=WAIT)
    assert seen.message.gsd == state

    # An unknown session gets nothing: the next known one is answered, the unknown never is.
    mark = phone.mark()
    await phone.send(GsdRequestCommand(sessionId="no-such-session"))
    await gsd(phone, plain)
    await phone.quiesce(0.3)
    assert phone.count("gsd-state", after=mark) == 1
    await wait_for_log(daemon, "gsd-request for an unknown session")


async def test_gsd_state_reads_the_directory_a_default_or_relative_cwd_resolved_to(
    start_daemon: DaemonFactory, pairs: PhonePair, workspace: Path
) -> None:
    """``create-session`` without a cwd runs in the first root, with a relative one under it:
    the GSD state must describe that directory, not the daemon's own working directory."""
    gsd_project(workspace, planning=True)
    gsd_project(workspace / "unplanned", planning=False)
    daemon = await start_daemon()
    phone = await pairs.pair(daemon)
    default = await create_session(phone)
    relative = await create_session(phone, cwd="unplanned")

    state = await gsd(phone, default)
    assert (state.available, state.installed, state.hasGit) == (True, True, True), state
    assert state.milestone == "v1.0 First Release"
    state = await gsd(phone, relative)
    assert (state.available, state.installed, state.hasGit) == (False, True, True), state
    assert state.situation == "No GSD project in this folder"
    beat = await phone.wait_for("sessions", lambda m: len(m.sessions) == 2, timeout=WAIT)
    cwds = {s.id: s.cwd for s in beat.message.sessions}
    assert cwds == {
        default: str(workspace.resolve()),
        relative: str((workspace / "unplanned").resolve()),
    }


# --- image upload: chunked ------------------------------------------------------------------------


async def test_chunked_upload_out_of_order_duplicated_missing_and_dedup(
    start_daemon: DaemonFactory, pairs: PhonePair, workspace: Path
) -> None:
    daemon = await start_daemon()
    phone = await pairs.pair(daemon)
    session = await create_session(phone)
    name = r"\d{13}-my_pic__1_\.png"

    # An unknown session: dropped with a log line.
    await phone.send(chunk("no-such-session", "u0", 0, 1, base64.b64encode(PNG).decode()))
    await wait_for_log(daemon, "image upload for an unknown session")

    # u1: out of order, a duplicate (with other data: the first copy wins), an out-of-range
    # index and a disagreeing totalChunks (both ignored), one chunk missing → not complete.
    pieces = chunks_of(PNG, 4)
    await phone.send(chunk(session, "u1", 2, 4, pieces[2]))
    await phone.send(chunk(session, "u1", 0, 4, pieces[0]))
    await phone.send(chunk(session, "u1", 2, 4, base64.b64encode(b"\x00" * 300).decode()))
    await phone.send(chunk(session, "u1", 7, 4, pieces[3]))
    await phone.send(chunk(session, "u1", 3, 5, pieces[3]))
    await phone.send(chunk(session, "u1", 3, 4, pieces[3]))
    # u2: another image, one chunk never sent.
    other = PNG[::-1]
    other_pieces = chunks_of(other, 3)
    await phone.send(chunk(session, "u2", 0, 3, other_pieces[0], text="never"))
    await phone.send(chunk(session, "u2", 2, 3, other_pieces[2], text="never"))
    await echo_round_trip(phone, session, "still waiting")
    await phone.quiesce(0.3)
    assert injected(phone, session) == [] and saved_files(workspace) == []

    # The missing chunk of u1 arrives: complete, saved, injected once.
    await phone.send(chunk(session, "u1", 1, 4, pieces[1]))
    (echo,) = await wait_injected(phone, session, 1)
    path = check_saved(echo, "look", workspace, PNG, name)
    user = [e for e in phone.transcript(session).values() if e.metadata == {"role": "user"}]
    assert user[-1].content == echo.removeprefix("echo: ")

    # The same image and caption again (a new upload id): not injected twice.
    for index, piece in enumerate(pieces):
        await phone.send(chunk(session, "u3", index, 4, piece))
    await wait_for_log(daemon, "the same image and caption arrived again within 10 minutes")
    # The same image with another caption, and an uncaptioned one: both injected.
    for index, piece in enumerate(pieces):
        await phone.send(chunk(session, "u4", index, 4, piece, text="and now?"))
    await wait_injected(phone, session, 2)
    await phone.send(chunk(session, "u5", 0, 1, base64.b64encode(other).decode(), text=""))
    echoes = await wait_injected(phone, session, 3)
    check_saved(echoes[1], "and now?", workspace, PNG, name)
    assert echoes[2].startswith("echo: Please examine this image: ")
    uncaptioned = Path(echoes[2].removeprefix("echo: Please examine this image: "))
    assert uncaptioned.read_bytes() == other
    await echo_round_trip(phone, session, "done")
    await phone.quiesce(0.3)
    assert len(injected(phone, session)) == 3
    assert len(saved_files(workspace)) == 3 and path in saved_files(workspace)
    assert "never" not in "".join(injected(phone, session))  # u2 never completed


# --- image upload: Blossom ------------------------------------------------------------------------


async def test_blossom_refusals_then_a_good_one_injected_once(
    start_daemon: DaemonFactory, pairs: PhonePair, workspace: Path, blossom: Blossom
) -> None:
    daemon = await start_daemon(env={"SSL_CERT_FILE": str(blossom.ca_pem)})
    phone = await pairs.pair(daemon)
    session = await create_session(phone)
    sealed = seal(PNG)
    oversized = 25 * MIB + 1024
    cases = [
        # (what, the command, the reason logged, whether the server is asked)
        (
            "wrong hash",
            blossom_upload(
                session,
                blossom.put("/wrong-hash", Reply(200, sealed.blob)),
                sealed,
                sha256=hashlib.sha256(b"something else").hexdigest(),
            ),
            "the blob's sha256 does not match the hash the phone sent",
            True,
        ),
        (
            "wrong key",
            blossom_upload(
                session,
                blossom.put("/wrong-key", Reply(200, sealed.blob)),
                sealed,
                key=os.urandom(32).hex(),
            ),
            "the image could not be decrypted",
            True,
        ),
        (
            "oversized body with its length",
            blossom_upload(
                session, blossom.put("/big-length", Reply(200, b"\0" * oversized)), sealed
            ),
            f"the blob is too large ({oversized} bytes",
            True,
        ),
        (
            "oversized streamed body, sizeBytes lying",
            blossom_upload(
                session, blossom.put("/big-stream", Reply(200, stream=oversized)), sealed, size=1000
            ),
            "the blob is larger than the limit",
            True,
        ),
        (
            "sizeBytes over the cap",
            blossom_upload(
                session, blossom.put("/claimed", Reply(200, sealed.blob)), sealed, size=oversized
            ),
            f"the image is too large ({oversized} bytes",
            False,
        ),
        (
            "plain http",
            blossom_upload(session, f"http://127.0.0.1:{blossom.server.port}/plain", sealed),
            "the Blossom URL must be https",
            False,
        ),
    ]
    for _, command, _, _ in cases:
        await phone.send(command)
    for what, _, reason, _ in cases:
        try:
            await wait_for_log(daemon, reason, timeout=WAIT)
        except AssertionError as exc:
            raise AssertionError(f"{what}: {exc}") from None
    # Refused from the command alone: the server never hears of them.
    expected = {urlsplit(command.url).path for _, command, _, fetched in cases if fetched}
    assert {r.path for r in blossom.server.requests} == expected
    await echo_round_trip(phone, session, "nothing attached?")
    assert injected(phone, session) == [] and saved_files(workspace) == []

    # The same daemon takes a good one: the refusals were refusals, not a broken pipeline.
    good = blossom.put(f"/{sealed.sha256}", Reply(200, sealed.blob))
    await phone.send(blossom_upload(session, good, sealed, text="this one"))
    (echo,) = await wait_injected(phone, session, 1)
    check_saved(echo, "this one", workspace, PNG, r"\d{13}-31_at_12_00\.png")

    # The same image and caption within ten minutes: downloaded again, not injected again.
    await phone.send(blossom_upload(session, good, sealed, text="this one"))
    await wait_for_log(daemon, "the same image and caption arrived again within 10 minutes")
    await echo_round_trip(phone, session, "anything else?")
    assert len(injected(phone, session)) == 1 and len(saved_files(workspace)) == 1
    assert [r.path for r in blossom.server.requests].count(f"/{sealed.sha256}") == 2
    assert daemon.running
    assert_secrets_kept(daemon, pairs, [sealed.key] + [c[1].key for c in cases])
