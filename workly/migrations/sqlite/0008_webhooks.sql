-- The webhook platform (see the PostgreSQL migration).
CREATE TABLE endpoints (
    seq             INTEGER PRIMARY KEY AUTOINCREMENT,
    id              TEXT NOT NULL UNIQUE REFERENCES queues (name) ON DELETE CASCADE,
    url             TEXT NOT NULL,
    description     TEXT,
    event_types     TEXT,  -- a JSON array; NULL: every type
    tenant          TEXT,
    headers         TEXT NOT NULL,
    enabled         INTEGER NOT NULL DEFAULT 1,
    disabled_reason TEXT,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL
);
CREATE INDEX endpoints_tenant ON endpoints (tenant, seq);

CREATE TABLE events (
    seq             INTEGER PRIMARY KEY AUTOINCREMENT,
    id              TEXT NOT NULL UNIQUE,
    type            TEXT NOT NULL,
    tenant          TEXT,
    key             TEXT,
    idempotency_key TEXT,
    payload         BLOB NOT NULL,
    content_type    TEXT NOT NULL,
    run_at          INTEGER NOT NULL,
    created_at      INTEGER NOT NULL
);
CREATE UNIQUE INDEX events_idempotency ON events (coalesce(tenant, ''), idempotency_key)
    WHERE idempotency_key IS NOT NULL;
CREATE INDEX events_type ON events (type, seq);
CREATE INDEX events_tenant ON events (tenant, seq);

CREATE TABLE breakers (
    key                  TEXT PRIMARY KEY,
    position             TEXT NOT NULL DEFAULT 'closed' CHECK (position IN ('closed', 'open')),
    consecutive_failures INTEGER NOT NULL DEFAULT 0,
    failing_since        INTEGER,
    last_success_at      INTEGER,
    probe_at             INTEGER,
    probe_seq            INTEGER,
    cooldown             REAL
);

ALTER TABLE tasks ADD COLUMN event_id TEXT;
ALTER TABLE tasks ADD COLUMN endpoint_id TEXT;
ALTER TABLE tasks ADD COLUMN breaker TEXT;
ALTER TABLE tasks ADD COLUMN held_run_at INTEGER;
CREATE INDEX tasks_event ON tasks (event_id) WHERE event_id IS NOT NULL;
CREATE INDEX tasks_held ON tasks (breaker) WHERE held_run_at IS NOT NULL;

DROP VIEW task_view;
CREATE VIEW task_view AS
SELECT t.seq, t.id, t.queue, t.status, t.url, t.method, t.headers, t.body,
       coalesce(t.held_run_at, t.run_at) AS run_at, t.priority,
       t.key, t.tenant, t.idempotency_key, t.attempts,
       coalesce(t.max_attempts, q.max_attempts) AS max_attempts,
       coalesce(t.timeout, q.timeout) AS timeout,
       t.last_status_code, t.last_error, t.created_at, t.updated_at, t.event_id, t.endpoint_id
FROM tasks t
JOIN queues q ON q.name = t.queue;
