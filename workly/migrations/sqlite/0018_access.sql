-- Tenants, API keys, the audit log and dashboard sessions (docs/security.md, docs/tenants.md).
--
-- tenants: one row per customer, made explicitly or on the first endpoint or event naming
-- it. api_keys: only each key's SHA-256 digest is kept; a revoked key keeps its row (and its
-- name in the audit log) with revoked_at set. audit_log: append-only, pruned after
-- WORKLY_AUDIT_RETENTION. Times are microseconds since the epoch.
CREATE TABLE tenants (
    seq           INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant        TEXT NOT NULL UNIQUE,
    name          TEXT,
    metadata      TEXT NOT NULL DEFAULT '{}',
    retention     INTEGER,
    max_endpoints INTEGER,
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL
);

CREATE TABLE api_keys (
    seq          INTEGER PRIMARY KEY AUTOINCREMENT,
    id           TEXT NOT NULL UNIQUE,
    digest       TEXT NOT NULL UNIQUE,
    name         TEXT NOT NULL,
    role         TEXT NOT NULL CHECK (role IN ('admin', 'reader', 'publisher')),
    tenant       TEXT,
    expires_at   INTEGER,
    created_at   INTEGER NOT NULL,
    last_used_at INTEGER,
    revoked_at   INTEGER
);

CREATE TABLE audit_log (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    id         TEXT NOT NULL UNIQUE,
    at         INTEGER NOT NULL,
    actor      TEXT NOT NULL,
    actor_key  TEXT NOT NULL,  -- the actor's key id, or its type ("token", "anonymous")
    action     TEXT NOT NULL,
    target     TEXT,
    tenant     TEXT,
    outcome    TEXT NOT NULL,
    status     INTEGER NOT NULL,
    source_ip  TEXT,
    user_agent TEXT,
    changes    TEXT NOT NULL
);
CREATE INDEX audit_log_at ON audit_log (at);

-- sessions: the dashboard's logins, one row each, found by the SHA-256 digest of the cookie;
-- a logout ends one (ended_at).
CREATE TABLE sessions (
    seq          INTEGER PRIMARY KEY AUTOINCREMENT,
    id           TEXT NOT NULL UNIQUE,
    digest       TEXT NOT NULL UNIQUE,
    key_id       TEXT,
    token_mac    TEXT,
    created_at   INTEGER NOT NULL,
    expires_at   INTEGER NOT NULL,
    ended_at     INTEGER
);
CREATE INDEX sessions_expires ON sessions (expires_at);

-- The tenants named before this version: each gets its row with defaults.
INSERT INTO tenants (tenant, created_at, updated_at)
SELECT tenant, min(created_at), min(created_at) FROM (
    SELECT tenant, created_at FROM endpoints WHERE tenant IS NOT NULL
    UNION ALL SELECT tenant, created_at FROM events WHERE tenant IS NOT NULL
) named
GROUP BY tenant;
