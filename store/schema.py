"""The bridge database's schema history: one `Migration` per list entry, never edited once released.

To add tables, append `Migration(len(BRIDGE_MIGRATIONS) + 1, "what it adds", "CREATE …")`. Rules
for entries (the runner enforces the first two):

- No transaction control: each migration already runs in its own `BEGIN IMMEDIATE … COMMIT`.
- Versions 1..n without gaps; a released entry's name and SQL are frozen (names are compared
  with the file's `schema_version` on every open).
- Types are pinned with `CHECK (typeof(…) = …)` rather than `STRICT` tables, which need SQLite
  3.37 and would refuse to open on older Python builds.
- Secret-bearing columns (`identity.secret_key`, later `credentials`) live only here: the file is
  0600 in a 0700 home, and nothing logs their values.

Version 2 holds the daemon's state (see `store.bridge_state`): phones, processed command ids,
sessions and tombstones, transcripts `(session_id, seq)`, the inbox of accepted inputs and the
outbox of durable replies. Version 3 adds `decisions`, the permission gate's audit log
(`store.decisions`). Version 4 adds the secrets set from phones, `provider_profiles` and
`credentials` (`store.accounts`), and `device_config` per phone (`store.device_config`).
Version 5 records which relays accepted each outbox event (`outbox.accepted_by`). Version 8
records which agent each session runs (`sessions.agent`). Version 9 keeps the call each decision
judged (`decisions.call`), for the editor's ``decisions.replay``. Version 10 adds Web Push: the
bridge's VAPID key (`push_key`) and the phones' subscriptions (`push_subscriptions`,
`store.push`).
"""

from __future__ import annotations

from typing import Final

from store.migrations import Migration

__all__ = ["BRIDGE_MIGRATIONS"]

BRIDGE_MIGRATIONS: Final[tuple[Migration, ...]] = (
    Migration(
        1,
        "kv and identity",
        """
        -- Small named values (the reference bridge's KV keys, e.g. deviceConfig.<phone>).
        -- `key <> ''` rather than length(key) > 0: SQLite's length() stops at a NUL character.
        CREATE TABLE kv (
            key TEXT PRIMARY KEY NOT NULL CHECK (typeof(key) = 'text' AND key <> ''),
            value TEXT NOT NULL CHECK (typeof(value) = 'text'),
            updated_at INTEGER NOT NULL CHECK (typeof(updated_at) = 'integer')
        ) WITHOUT ROWID;

        -- The bridge's Nostr identity: one row, the 32-byte secp256k1 secret key.
        CREATE TABLE identity (
            id INTEGER PRIMARY KEY CHECK (id = 1),
            secret_key BLOB NOT NULL
                CHECK (typeof(secret_key) = 'blob' AND length(secret_key) = 32),
            created_at INTEGER NOT NULL CHECK (typeof(created_at) = 'integer')
        );
        """,
    ),
    Migration(
        2,
        "daemon state",
        """
        -- Paired phones; identity is the pubkey (the event author), never a payload claim.
        CREATE TABLE phones (
            pubkey TEXT PRIMARY KEY NOT NULL CHECK (length(pubkey) = 64),
            npub TEXT NOT NULL,
            label TEXT NOT NULL,
            paired_at TEXT NOT NULL
        ) WITHOUT ROWID;

        -- Every command event id the bridge has processed, kept until relays drop the event.
        CREATE TABLE processed (
            event_id TEXT PRIMARY KEY NOT NULL CHECK (length(event_id) = 64),
            created_at INTEGER NOT NULL CHECK (typeof(created_at) = 'integer')
        ) WITHOUT ROWID;
        CREATE INDEX processed_by_age ON processed (created_at);

        -- The session registry: one JSON record per session (fields of engine SessionRecord).
        CREATE TABLE sessions (
            session_id TEXT PRIMARY KEY NOT NULL CHECK (session_id <> ''),
            record TEXT NOT NULL CHECK (typeof(record) = 'text')
        ) WITHOUT ROWID;

        -- Closed session ids the heartbeat still announces (at most 100, oldest first).
        CREATE TABLE tombstones (
            position INTEGER PRIMARY KEY AUTOINCREMENT,
            session_id TEXT NOT NULL UNIQUE
        );

        -- Transcript lines under the seq assigned at append; never renumbered.
        CREATE TABLE transcripts (
            session_id TEXT NOT NULL,
            seq INTEGER NOT NULL CHECK (typeof(seq) = 'integer' AND seq >= 1),
            entry TEXT NOT NULL,
            PRIMARY KEY (session_id, seq)
        ) WITHOUT ROWID;

        -- Accepted inputs on their way to a runner; rowid keeps arrival order.
        CREATE TABLE inbox (
            uid TEXT NOT NULL UNIQUE,
            session_id TEXT NOT NULL,
            text TEXT NOT NULL,
            input_id TEXT,
            state TEXT NOT NULL CHECK (state IN ('pending', 'sent')),
            created_at INTEGER NOT NULL
        );
        CREATE INDEX inbox_by_session ON inbox (session_id, state);

        -- Signed events of durable replies not yet accepted by any relay.
        CREATE TABLE outbox (
            event_id TEXT NOT NULL UNIQUE,
            event TEXT NOT NULL,
            expires_at INTEGER,
            queued_at INTEGER NOT NULL
        );
        """,
    ),
    Migration(
        3,
        "permission decisions",
        """
        -- The permission gate's audit log, append-only: one row per decision (auto-allow, card
        -- shown, phone answer, block), read by `codedeck-bridge decisions` (store.decisions).
        -- `at` is ISO 8601 UTC; `reasons` a JSON list of reason labels (e.g. ["rm_rf"]); `detail`
        -- a short human description. No secrets: the gate writes labels, never tool input.
        CREATE TABLE decisions (
            id INTEGER PRIMARY KEY,
            at TEXT NOT NULL CHECK (typeof(at) = 'text'),
            session_id TEXT NOT NULL CHECK (typeof(session_id) = 'text'),
            tool TEXT NOT NULL CHECK (typeof(tool) = 'text'),
            outcome TEXT NOT NULL CHECK (typeof(outcome) = 'text' AND outcome <> ''),
            reasons TEXT NOT NULL DEFAULT '[]' CHECK (typeof(reasons) = 'text'),
            detail TEXT
        );
        CREATE INDEX decisions_by_session ON decisions (session_id, id);
        """,
    ),
    Migration(
        4,
        "provider profiles, credentials, device config",
        """
        -- Custom provider profiles (CDX-062), one JSON record per profile id, auth token
        -- included (secret: it never leaves the bridge). See store.accounts.
        CREATE TABLE provider_profiles (
            id TEXT PRIMARY KEY NOT NULL CHECK (typeof(id) = 'text' AND id <> ''),
            record TEXT NOT NULL CHECK (typeof(record) = 'text'),
            updated_at INTEGER NOT NULL CHECK (typeof(updated_at) = 'integer')
        ) WITHOUT ROWID;

        -- Credentials set from a phone (anthropicApiKey, githubPat); secret. A cleared value
        -- is a deleted row. See store.accounts.
        CREATE TABLE credentials (
            name TEXT PRIMARY KEY NOT NULL CHECK (typeof(name) = 'text' AND name <> ''),
            value TEXT NOT NULL CHECK (typeof(value) = 'text'),
            updated_at INTEGER NOT NULL CHECK (typeof(updated_at) = 'integer')
        ) WITHOUT ROWID;

        -- Each phone's device-testing configuration (JSON, transport-only fields stripped),
        -- keyed by the phone's pubkey. See store.device_config.
        CREATE TABLE device_config (
            phone TEXT PRIMARY KEY NOT NULL CHECK (length(phone) = 64),
            config TEXT NOT NULL CHECK (typeof(config) = 'text'),
            updated_at INTEGER NOT NULL CHECK (typeof(updated_at) = 'integer')
        ) WITHOUT ROWID;
        """,
    ),
    Migration(
        5,
        "outbox acceptance per relay",
        """
        -- The relays (space-separated URLs) that accepted an outbox event so far. A durable
        -- reply leaves the outbox only once every configured relay holds it: a phone may reach
        -- just one of them, and that one may have been down when the reply went out.
        ALTER TABLE outbox ADD COLUMN accepted_by TEXT NOT NULL DEFAULT '';
        """,
    ),
    Migration(
        6,
        "answers for session hosts",
        """
        -- Answers to permission asks parked in a session host, kept from the commit that decided
        -- them until the host confirmed it has them: a daemon that dies in between sends them
        -- again when it reconnects, so the phone is never asked twice (store.host_answers).
        -- `answer` is JSON: {allow, message, always, updated_input}.
        CREATE TABLE host_answers (
            session_id TEXT NOT NULL CHECK (typeof(session_id) = 'text'),
            request_id TEXT NOT NULL CHECK (typeof(request_id) = 'text'),
            answer TEXT NOT NULL CHECK (typeof(answer) = 'text'),
            created_at INTEGER NOT NULL CHECK (typeof(created_at) = 'integer'),
            PRIMARY KEY (session_id, request_id)
        ) WITHOUT ROWID;
        """,
    ),
    Migration(
        7,
        "inbox rows the agent took",
        """
        -- An inbox row is 'taken' once the agent reported it took the input into its
        -- conversation (a session host's journal says so, before the agent's own record
        -- does): a restarted agent never gets it again. SQLite cannot change a CHECK, so the
        -- table is rebuilt; the rows keep their order (rowid is arrival order).
        CREATE TABLE inbox_v7 (
            uid TEXT NOT NULL UNIQUE,
            session_id TEXT NOT NULL,
            text TEXT NOT NULL,
            input_id TEXT,
            state TEXT NOT NULL CHECK (state IN ('pending', 'sent', 'taken')),
            created_at INTEGER NOT NULL
        );
        INSERT INTO inbox_v7 (uid, session_id, text, input_id, state, created_at)
            SELECT uid, session_id, text, input_id, state, created_at FROM inbox ORDER BY rowid;
        DROP TABLE inbox;
        ALTER TABLE inbox_v7 RENAME TO inbox;
        CREATE INDEX inbox_by_session ON inbox (session_id, state);
        """,
    ),
    Migration(
        8,
        "the agent of each session",
        """
        -- The agent a session runs: 'claude' (Claude Code), or the id of an [agents.<id>] table
        -- of config.toml (OpenCode, any ACP agent). Sessions stored before agents existed ran
        -- Claude Code. A column rather than a field of the JSON record: a session's agent never
        -- changes, and the runtime picks the runner by it before it reads anything else.
        ALTER TABLE sessions ADD COLUMN agent TEXT NOT NULL DEFAULT 'claude'
            CHECK (typeof(agent) = 'text' AND agent <> '');
        """,
    ),
    Migration(
        9,
        "the call each decision judged",
        """
        -- The call a decision judged, as JSON {"tool", "input"} with secrets masked and the
        -- input capped (store.decisions), so that the editor's decisions.replay can judge it
        -- again with today's gate. NULL for rows written before (they cannot be replayed) and
        -- for decisions that judged no call (a card denied by an interrupt).
        ALTER TABLE decisions ADD COLUMN call TEXT CHECK (call IS NULL OR typeof(call) = 'text');
        """,
    ),
    Migration(
        10,
        "web push",
        """
        -- The bridge's VAPID key (RFC 8292): one row, the 32-byte P-256 private scalar. Secret,
        -- like identity.secret_key; made once, so that the phones' subscriptions stay valid.
        CREATE TABLE push_key (
            id INTEGER PRIMARY KEY CHECK (id = 1),
            private_key BLOB NOT NULL
                CHECK (typeof(private_key) = 'blob' AND length(private_key) = 32),
            created_at INTEGER NOT NULL CHECK (typeof(created_at) = 'integer')
        );

        -- The phones' Web Push subscriptions (push-subscribe), one row per endpoint: the phone
        -- that sent it last owns it. `id` grows with every subscribe, so the newest rows of a
        -- phone are kept when it passes the cap (store.push). `auth` is secret.
        CREATE TABLE push_subscriptions (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            phone TEXT NOT NULL CHECK (length(phone) = 64),
            endpoint TEXT NOT NULL UNIQUE CHECK (typeof(endpoint) = 'text' AND endpoint <> ''),
            p256dh TEXT NOT NULL CHECK (typeof(p256dh) = 'text'),
            auth TEXT NOT NULL CHECK (typeof(auth) = 'text'),
            created_at INTEGER NOT NULL CHECK (typeof(created_at) = 'integer')
        );
        CREATE INDEX push_subscriptions_by_phone ON push_subscriptions (phone, id);
        """,
    ),
)
