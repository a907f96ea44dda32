"""The write policy of a private CodeDeck relay.

One decision function over strfry's write-policy plugin messages (``{type, event, receivedAt,
sourceType, sourceInfo}`` → ``{id, action, msg}``), built as a pipeline of small rules
(:mod:`relaypolicy.policies`, composed in :mod:`relaypolicy.pipeline`). It runs:

* as the strfry plugin (``codedeck-relaypolicy plugin``, :mod:`relaypolicy.plugin`), with the
  SQLite registry shared with the admin API (:mod:`relaypolicy.admin`);
* inside the bridge daemon's embedded relay, with a registry of the bridge and its paired phones
  and narrower rules (the four CodeDeck kinds only, :mod:`relaypolicy.embedded`);
* in the tests, inside a real relay, both ways.

This package namespace re-exports the pure core only; the I/O parts (plugin loop, admin server,
admin client, CLI) are imported from their modules.
"""

from __future__ import annotations

from relaypolicy.config import DEFAULT_CONFIG, ConfigError, PolicyConfig, RateLimit, parse_config
from relaypolicy.message import (
    ACCEPT,
    Action,
    Decision,
    PolicyInput,
    RequestError,
    SourceType,
    parse_request,
    serialize_response,
)
from relaypolicy.pipeline import DEFAULT_POLICIES, INTERNAL_ERROR, Answer, RelayPolicy, run_pipeline
from relaypolicy.ratelimit import TokenBuckets, source_key
from relaypolicy.registry import MemoryRegistry, NotRegisteredError, PubkeyRegistry

__all__ = [
    "ACCEPT",
    "DEFAULT_CONFIG",
    "DEFAULT_POLICIES",
    "INTERNAL_ERROR",
    "Action",
    "Answer",
    "ConfigError",
    "Decision",
    "MemoryRegistry",
    "NotRegisteredError",
    "PolicyConfig",
    "PolicyInput",
    "PubkeyRegistry",
    "RateLimit",
    "RelayPolicy",
    "RequestError",
    "SourceType",
    "TokenBuckets",
    "parse_config",
    "parse_request",
    "run_pipeline",
    "serialize_response",
    "source_key",
]
