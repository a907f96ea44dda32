"""Smoke: the settings commands answer through the real daemon (the full matrix lives in
test_daemon_settings.py)."""

from __future__ import annotations

from bridge.protocol import (
    ProviderProfilesRequestCommand,
    SetCredentialsCommand,
    SetProviderProfileCommand,
)
from bridge.protocol.shared import ModelEntry, ProviderProfileWrite
from tests.support.daemon import DaemonProcess
from tests.support.phone import PhoneSimulator


async def test_profile_round_trip_never_returns_the_token(
    daemon: DaemonProcess, phone: PhoneSimulator
) -> None:
    secret = "sk-test-SECRET-token-1234567890"
    mark = phone.mark()
    await phone.send(
        SetProviderProfileCommand(
            profileId="kimi",
            profile=ProviderProfileWrite(
                label="Kimi",
                baseUrl="http://127.0.0.1:9",  # nothing listens: the probe cannot run
                authToken=secret,
                models=[ModelEntry(id="kimi-k3")],
            ),
        )
    )
    ack = await phone.wait_for("provider-profile-ack", after=mark, timeout=30)
    assert ack.message.success and ack.message.tokenValid is None
    listing = await phone.wait_for("provider-profiles", after=mark)
    assert [(p.id, p.hasToken) for p in listing.message.profiles] == [("kimi", True)]
    await phone.send(ProviderProfilesRequestCommand())
    await phone.wait_for_count("provider-profiles", 2, after=mark)
    await phone.send(SetCredentialsCommand(anthropicApiKey=None))
    creds = await phone.wait_for("credentials-ack", after=mark)
    assert creds.message.hasAnthropicKey is False and creds.message.keyValid is None
    beat = await phone.wait_for("sessions")
    assert "custom-providers" in (beat.message.capabilities or [])
    for received in phone.received:
        assert secret not in received.message.model_dump_json()
    assert secret not in daemon.log_text
