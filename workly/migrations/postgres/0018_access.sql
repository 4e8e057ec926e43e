-- Tenants, API keys, the audit log and dashboard sessions (docs/security.md, docs/tenants.md).
--
-- tenants: one row per customer, made explicitly or on the first endpoint or event naming
-- it. api_keys: only each key's SHA-256 digest is kept; a revoked key keeps its row (and its
-- name in the audit log) with revoked_at set. audit_log: append-only, pruned after
-- WORKLY_AUDIT_RETENTION.
CREATE TABLE tenants (
    seq           bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
    tenant        text PRIMARY KEY,
    name          text,
    metadata      json NOT NULL DEFAULT '{}',
    retention     bigint,
    max_endpoints integer,
    created_at    timestamptz NOT NULL,
    updated_at    timestamptz NOT NULL
);

CREATE TABLE api_keys (
    seq          bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
    id           text PRIMARY KEY,
    digest       text NOT NULL UNIQUE,
    name         text NOT NULL,
    role         text NOT NULL CHECK (role IN ('admin', 'reader', 'publisher')),
    tenant       text,
    expires_at   timestamptz,
    created_at   timestamptz NOT NULL,
    last_used_at timestamptz,
    revoked_at   timestamptz
);

CREATE TABLE audit_log (
    seq        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id         text NOT NULL UNIQUE,
    at         timestamptz NOT NULL,
    actor      json NOT NULL,
    actor_key  text NOT NULL,  -- the actor's key id, or its type ("token", "anonymous")
    action     text NOT NULL,
    target     text,
    tenant     text,
    outcome    text NOT NULL,
    status     integer NOT NULL,
    source_ip  text,
    user_agent text,
    changes    json NOT NULL
);
CREATE INDEX audit_log_at ON audit_log (at);

-- sessions: the dashboard's logins, one row each, found by the SHA-256 digest of the cookie;
-- a logout ends one (ended_at), and every process sees it within a second.
CREATE TABLE sessions (
    seq          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id           text NOT NULL UNIQUE,
    digest       text NOT NULL UNIQUE,
    key_id       text,
    token_mac    text,
    created_at   timestamptz NOT NULL,
    expires_at   timestamptz NOT NULL,
    ended_at     timestamptz
);
CREATE INDEX sessions_expires ON sessions (expires_at);

-- A task enqueue_task stored announces its queue: the process that takes the row counts it in
-- workly_tasks_enqueued_total, as the API's enqueues are (publish_event's rows name none).
ALTER TABLE sql_arrivals ADD COLUMN queue text;

-- The tenants named before this version: each gets its row with defaults.
INSERT INTO tenants (tenant, created_at, updated_at)
SELECT tenant, min(created_at), min(created_at) FROM (
    SELECT tenant, created_at FROM endpoints WHERE tenant IS NOT NULL
    UNION ALL SELECT tenant, created_at FROM events WHERE tenant IS NOT NULL
) named
GROUP BY tenant;
