"""The engine's side of the settings commands: provider profiles, credentials, device config.

Flows (PROTOCOL-v10-wire.md §5 rows 19–23, §11; REFERENCE-BEHAVIOUR §1.13):

- ``set-provider-profile``: the write (or delete) commits with the command's ``MarkProcessed``.
  With a token to check, a ``ProbeProvider`` effect runs next and its answer
  (``ProviderProbed``) sends the ack to the sender, then the redacted list to every phone.
  Without one, both go out at once (the ack then has no ``tokenValid``). A crash during the
  probe costs the ack only: the profile is already stored.
- ``provider-profiles-request``: the list, to the requester only.
- ``set-credentials``: same shape; the probe checks the key sessions would use (the
  environment's ``ANTHROPIC_API_KEY`` first, else the stored one) and only when the command set
  a new key. ``credentials-ack`` goes to the sender only.
- ``set-device-config``: validated, transport-only fields stripped, persisted per phone;
  ``device-config-ack`` to the sender.

Handlers return only their own effects; admission adds the command's processed marks.

Secrets (tokens, keys) travel inbound once; replies carry only ``hasToken`` / ``has*Key``.
"""

from __future__ import annotations

from collections.abc import Iterable

from bridge.engine.effects import (
    Commit,
    DeleteProviderProfile,
    Effect,
    ProbeAnthropicKey,
    ProbeProvider,
    Publish,
    SaveDeviceConfig,
    SaveProviderProfile,
    SetCredential,
    StoreOp,
)
from bridge.engine.phones.credentials import (
    ANTHROPIC_KEY_NAME,
    Credentials,
    apply_set_credentials,
    credentials_ack,
    effective_anthropic_key,
)
from bridge.engine.phones.device_config import device_config_ack, prepare_device_config
from bridge.engine.phones.providers import (
    ProviderBook,
    ProviderProfile,
    profile_to_record,
    provider_profile_ack,
    provider_profiles_message,
)
from bridge.protocol import (
    SetCredentialsCommand,
    SetDeviceConfigCommand,
    SetProviderProfileCommand,
)

__all__ = ["Accounts"]


class Accounts:
    """Provider profiles and credentials as the engine holds them.

    Args:
        machine: the machine name (the acks carry it).
        profiles: the stored profiles (loaded at boot).
        credentials: the stored credentials (loaded at boot).
        env_api_key: the daemon environment's ``ANTHROPIC_API_KEY`` (it wins over a stored key).
    """

    def __init__(
        self,
        machine: str,
        profiles: Iterable[ProviderProfile] = (),
        credentials: Credentials | None = None,
        env_api_key: str | None = None,
    ) -> None:
        self._machine = machine
        self.book = ProviderBook(profiles)
        self.credentials = credentials or Credentials()
        self._env_api_key = env_api_key

    @property
    def api_key(self) -> str | None:
        """The key sessions use (never logged)."""
        return effective_anthropic_key(self._env_api_key, self.credentials)

    def set_provider_profile(
        self,
        command: SetProviderProfileCommand,
        phone: str,
        now: float,
        everyone: tuple[str, ...],
    ) -> list[Effect]:
        outcome = self.book.apply_set(command, now)
        ops: list[StoreOp] = []
        if outcome.save is not None:
            ops.append(SaveProviderProfile(outcome.profile_id, profile_to_record(outcome.save)))
        if outcome.delete:
            ops.append(DeleteProviderProfile(outcome.profile_id))
        if outcome.probe is not None:
            probe = outcome.probe
            return [
                Commit(tuple(ops)),
                ProbeProvider(phone, outcome.profile_id, probe.base_url, probe.token, probe.model),
            ]
        ack = provider_profile_ack(
            self._machine, outcome.profile_id, success=outcome.success, error=outcome.error
        )
        outbox = [Publish(ack, (phone,))]
        if outcome.changed:
            outbox.append(Publish(provider_profiles_message(self._machine, self.book), everyone))
        return [Commit(tuple(ops), outbox=tuple(outbox))]

    def provider_probed(
        self, phone: str, profile_id: str, valid: bool | None, everyone: tuple[str, ...]
    ) -> list[Effect]:
        ack = provider_profile_ack(self._machine, profile_id, success=True, token_valid=valid)
        listing = provider_profiles_message(self._machine, self.book)
        return [Commit((), outbox=(Publish(ack, (phone,)), Publish(listing, everyone)))]

    def profiles_for(self, phone: str) -> list[Effect]:
        listing = provider_profiles_message(self._machine, self.book)
        return [Commit((), outbox=(Publish(listing, (phone,)),))]

    def set_credentials(self, command: SetCredentialsCommand, phone: str) -> list[Effect]:
        outcome = apply_set_credentials(self.credentials, command)
        if not outcome.success:
            ack = credentials_ack(
                self._machine, self.credentials, success=False, error=outcome.error
            )
            return [Commit((), outbox=(Publish(ack, (phone,)),))]
        self.credentials = outcome.credentials
        ops = tuple(SetCredential(c.name, c.value) for c in outcome.changes)
        new_key = any(c.name == ANTHROPIC_KEY_NAME and c.value for c in outcome.changes)
        key = self.api_key
        if new_key and key:
            return [Commit(ops), ProbeAnthropicKey(phone, key)]
        ack = credentials_ack(self._machine, self.credentials)
        return [Commit(ops, outbox=(Publish(ack, (phone,)),))]

    def credentials_probed(self, phone: str, valid: bool | None) -> list[Effect]:
        ack = credentials_ack(self._machine, self.credentials, key_valid=valid)
        return [Commit((), outbox=(Publish(ack, (phone,)),))]

    @staticmethod
    def set_device_config(command: SetDeviceConfigCommand, phone: str) -> list[Effect]:
        prepared = prepare_device_config(command.config)
        if isinstance(prepared, str):
            return [Commit((), outbox=(Publish(device_config_ack(prepared), (phone,)),))]
        return [
            Commit(
                (SaveDeviceConfig(phone, prepared),),
                outbox=(Publish(device_config_ack(), (phone,)),),
            )
        ]
