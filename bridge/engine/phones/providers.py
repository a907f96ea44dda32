"""Custom provider profiles (CDX-062): the book the engine keeps, and the replies built from it.

A profile points a session's Anthropic client at another Anthropic-compatible backend and hands
it the profile's auth token. The rules (PROTOCOL-v10-wire.md §4.6, §11; REFERENCE-BEHAVIOUR
§1.13):

- ``set-provider-profile`` upserts (``profile`` object) or deletes (``profile: null``) one profile.
  ``authToken`` is tri-state: :data:`~bridge.protocol.KEEP` (key absent) keeps the stored token,
  ``None`` clears it, a string sets it.
- The https rule (:func:`~bridge.protocol.baseurl.base_url_allowed`) applies on write: an insecure
  profile is never persisted. A legacy insecure profile already stored (from an older bridge)
  can still be listed and deleted, but a session never starts on it and no probe sends its token.
- The token rides the wire once, inbound. Everything bridge → phone carries only ``hasToken``;
  :class:`ProviderProfile`, :class:`ResolvedProvider` and :class:`ProbeRequest` keep the token out
  of ``repr`` so that logging one of them cannot leak it.
- A session bound to a profile looks it up again at every spawn, restart and resume
  (:meth:`ProviderBook.resolve_for_session`); an unknown profile, a missing token or an insecure
  URL fails the session with a readable reason. Without an explicit model the session runs the
  profile's ``defaultModel``, else ``models[0]``.

Order of the redacted list: by label (case-insensitively), then id. The store has no insertion
order, and a stable order keeps every phone's list identical.

Pure: the engine loads the book at boot from the store records (:func:`profile_from_record`) and
persists what :meth:`ProviderBook.apply_set` returns (:func:`profile_to_record`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import field
from typing import Any, Final

from bridge.protocol import (
    BASE_URL_ERROR,
    KEEP,
    ModelEntry,
    ProviderProfileAckMessage,
    ProviderProfileInfo,
    ProviderProfilesMessage,
    SetProviderProfileCommand,
    base_url_allowed,
)
from bridge.records import record

__all__ = [
    "MAX_PROFILES",
    "MAX_TOKEN_LENGTH",
    "ProbeRequest",
    "ProviderBook",
    "ProviderProfile",
    "ProviderSetOutcome",
    "ResolvedProvider",
    "profile_from_record",
    "profile_to_record",
    "provider_profile_ack",
    "provider_profiles_message",
    "token_problem",
]

MAX_PROFILES: Final = 100
"""At most this many stored profiles; an upsert of a new id past it is refused."""

MAX_TOKEN_LENGTH: Final = 8192
"""Longer tokens are refused: they go into an HTTP header and a child's environment."""


@record
class ProviderProfile:
    """One stored profile, token included (never in ``repr``)."""

    id: str
    label: str
    base_url: str
    models: tuple[ModelEntry, ...]
    default_model: str | None = None
    auth_token: str | None = field(default=None, repr=False)
    updated_at: float | None = None

    @property
    def has_token(self) -> bool:
        return bool(self.auth_token)

    @property
    def secure(self) -> bool:
        """Whether the base URL passes the https rule (a legacy row may not)."""
        return base_url_allowed(self.base_url)

    @property
    def model(self) -> str | None:
        """The model a session runs without an explicit one: ``defaultModel``, else ``models[0]``."""
        if self.default_model:
            return self.default_model
        return self.models[0].id if self.models else None

    def offers(self, model: str) -> bool:
        """Whether `model` is one of this profile's models (or its default)."""
        return model == self.default_model or any(m.id == model for m in self.models)

    def info(self) -> ProviderProfileInfo:
        """The redacted wire view: ``hasToken`` instead of the token."""
        return ProviderProfileInfo(
            id=self.id,
            label=self.label,
            baseUrl=self.base_url,
            models=list(self.models),
            defaultModel=self.default_model,
            hasToken=self.has_token,
        )


@record
class ProbeRequest:
    """A token check to run: ``POST {base_url}/v1/messages`` with ``max_tokens: 1``."""

    base_url: str
    token: str = field(repr=False)
    model: str


@record
class ResolvedProvider:
    """What a runner needs to start a provider-bound session (the token never in ``repr``)."""

    profile_id: str
    label: str
    base_url: str
    token: str = field(repr=False)
    model: str


@record
class ProviderSetOutcome:
    """What one ``set-provider-profile`` did, for the engine to turn into effects.

    Attributes:
        profile_id: the command's ``profileId`` (echoed in the ack).
        success: whether the write was applied.
        error: the ack's ``error`` when it was refused (never contains the token).
        save: the profile to persist (upsert), or None.
        delete: the stored row must be deleted.
        changed: the stored set changed (the list is broadcast to every phone).
        probe: the token check to run before acking, or None: the ack then has no
            ``tokenValid`` (no token, or nothing to check).
    """

    profile_id: str
    success: bool
    error: str | None = None
    save: ProviderProfile | None = None
    delete: bool = False
    changed: bool = False
    probe: ProbeRequest | None = None


def token_problem(token: str) -> str | None:
    """Why `token` cannot be used as a credential, or None. The text never quotes the token.

    A token goes into an HTTP header and a child process's environment: printable ASCII without
    spaces only (every real API token is), and bounded.
    """
    if len(token) > MAX_TOKEN_LENGTH:
        return f"the auth token is too long (at most {MAX_TOKEN_LENGTH} characters)"
    if not all(0x21 <= ord(char) <= 0x7E for char in token):
        return "the auth token must be printable ASCII without spaces"
    return None


class ProviderBook:
    """The stored provider profiles, by id."""

    def __init__(self, profiles: Iterable[ProviderProfile] = ()) -> None:
        self._profiles: dict[str, ProviderProfile] = {p.id: p for p in profiles}

    def __len__(self) -> int:
        return len(self._profiles)

    def __contains__(self, profile_id: object) -> bool:
        return profile_id in self._profiles

    def get(self, profile_id: str) -> ProviderProfile | None:
        return self._profiles.get(profile_id)

    def all(self) -> list[ProviderProfile]:
        """Every profile, in list order (label case-insensitively, then id)."""
        return sorted(self._profiles.values(), key=lambda p: (p.label.casefold(), p.id))

    def redacted(self) -> list[ProviderProfileInfo]:
        """The list as phones see it (``hasToken``, never the token)."""
        return [p.info() for p in self.all()]

    def label_of(self, profile_id: str) -> str:
        """The heartbeat's ``providerLabel``: the label, or the raw id once deleted."""
        profile = self._profiles.get(profile_id)
        return profile.label if profile is not None else profile_id

    def apply_set(self, command: SetProviderProfileCommand, now: float) -> ProviderSetOutcome:
        """Apply one ``set-provider-profile`` to the book.

        Args:
            command: the decoded command.
            now: unix time, recorded as the profile's ``updated_at``.

        Returns:
            The outcome; when ``success`` the book already holds the new state.
        """
        profile_id = command.profileId
        existing = self._profiles.get(profile_id)
        write = command.profile
        if write is None:
            # A delete is always allowed, legacy insecure rows included.
            if existing is None:
                return ProviderSetOutcome(profile_id, success=True)
            del self._profiles[profile_id]
            return ProviderSetOutcome(profile_id, success=True, delete=True, changed=True)
        if not base_url_allowed(write.baseUrl):
            return ProviderSetOutcome(profile_id, success=False, error=BASE_URL_ERROR)
        if existing is None and len(self._profiles) >= MAX_PROFILES:
            return ProviderSetOutcome(
                profile_id,
                success=False,
                error=f"too many provider profiles (at most {MAX_PROFILES}); delete one first",
            )
        token: str | None
        if write.authToken is KEEP:
            token = existing.auth_token if existing is not None else None
        elif write.authToken is None:
            token = None
        else:
            token = write.authToken
            problem = token_problem(token)
            if problem is not None:
                return ProviderSetOutcome(profile_id, success=False, error=problem)
        profile = ProviderProfile(
            id=profile_id,
            label=write.label,
            base_url=write.baseUrl,
            models=tuple(write.models),
            default_model=write.defaultModel,
            auth_token=token,
            updated_at=now,
        )
        self._profiles[profile_id] = profile
        return ProviderSetOutcome(
            profile_id,
            success=True,
            save=profile,
            changed=True,
            probe=self._probe_of(profile),
        )

    def probe_request(self, profile_id: str) -> ProbeRequest | None:
        """The token check for a stored profile, or None (unknown, no token, insecure)."""
        profile = self._profiles.get(profile_id)
        return self._probe_of(profile) if profile is not None else None

    @staticmethod
    def _probe_of(profile: ProviderProfile) -> ProbeRequest | None:
        model = profile.model
        if not profile.auth_token or not profile.secure or model is None:
            return None
        return ProbeRequest(base_url=profile.base_url, token=profile.auth_token, model=model)

    def resolve_for_session(
        self, provider_id: str, model: str | None = None
    ) -> ResolvedProvider | str:
        """Look a profile up for a session spawn, restart or resume.

        Args:
            provider_id: the session's ``providerId``.
            model: the session's explicit model, if any.

        Returns:
            The resolved provider, or the readable reason the session cannot start on it
            (for ``session-failed``).
        """
        profile = self._profiles.get(provider_id)
        if profile is None:
            return f'provider profile "{provider_id}" does not exist (it may have been deleted)'
        if not profile.secure:
            return f'provider profile "{profile.label}" cannot be used: {BASE_URL_ERROR}'
        if not profile.auth_token:
            return (
                f'provider profile "{profile.label}" has no auth token; '
                "set one in the app's provider settings"
            )
        chosen = model or profile.model
        if chosen is None:  # pragma: no cover - models has at least one entry on the wire
            return f'provider profile "{profile.label}" lists no models'
        if model and not profile.offers(model):
            return f'model "{model}" is not offered by provider profile "{profile.label}"'
        return ResolvedProvider(
            profile_id=profile.id,
            label=profile.label,
            base_url=profile.base_url,
            token=profile.auth_token,
            model=chosen,
        )

    def allows_model(self, provider_id: str, model: str) -> bool:
        """For the ``model`` command on a provider-bound session: False gets no reply."""
        profile = self._profiles.get(provider_id)
        return profile is not None and profile.offers(model)


# --- replies -----------------------------------------------------------------------------------


def provider_profile_ack(
    machine: str,
    profile_id: str,
    *,
    success: bool,
    token_valid: bool | None = None,
    error: str | None = None,
) -> ProviderProfileAckMessage:
    """The per-set ack (to the sender only); ``tokenValid`` absent when no probe ran."""
    return ProviderProfileAckMessage(
        machine=machine,
        profileId=profile_id,
        success=success,
        tokenValid=token_valid,
        error=error,
    )


def provider_profiles_message(machine: str, book: ProviderBook) -> ProviderProfilesMessage:
    """The redacted list: to the requester, or to every phone after a change."""
    return ProviderProfilesMessage(machine=machine, profiles=book.redacted())


# --- store records -----------------------------------------------------------------------------


def profile_to_record(profile: ProviderProfile) -> dict[str, Any]:
    """The stored JSON record (the reference's ``providerProfiles`` entry shape, token included)."""
    record: dict[str, Any] = {
        "id": profile.id,
        "label": profile.label,
        "baseUrl": profile.base_url,
        "models": [m.model_dump(exclude_none=True) for m in profile.models],
    }
    if profile.default_model is not None:
        record["defaultModel"] = profile.default_model
    if profile.auth_token is not None:
        record["authToken"] = profile.auth_token
    if profile.updated_at is not None:
        record["updatedAt"] = profile.updated_at
    return record


def profile_from_record(profile_id: str, record: Mapping[str, Any]) -> ProviderProfile | None:
    """Read a stored record back; None when it is unusable (it is then skipped, not fatal).

    The https rule is deliberately not applied: a legacy insecure row must stay listable and
    deletable.
    """
    label = record.get("label")
    base_url = record.get("baseUrl")
    raw_models = record.get("models")
    if not profile_id or not isinstance(label, str) or not label:
        return None
    if not isinstance(base_url, str) or not base_url or not isinstance(raw_models, list):
        return None
    models: list[ModelEntry] = []
    for item in raw_models:
        if not isinstance(item, Mapping):
            continue
        model_id = item.get("id")
        model_label = item.get("label")
        if isinstance(model_id, str) and model_id:
            models.append(
                ModelEntry(id=model_id, label=model_label if isinstance(model_label, str) else None)
            )
    if not models:
        return None
    default_model = record.get("defaultModel")
    token = record.get("authToken")
    updated_at = record.get("updatedAt")
    return ProviderProfile(
        id=profile_id,
        label=label,
        base_url=base_url,
        models=tuple(models),
        default_model=default_model if isinstance(default_model, str) else None,
        auth_token=token if isinstance(token, str) and token else None,
        updated_at=float(updated_at)
        if isinstance(updated_at, int | float) and not isinstance(updated_at, bool)
        else None,
    )
