-- Failure handling (see the PostgreSQL migration).
ALTER TABLE queues ADD COLUMN stop_on TEXT NOT NULL DEFAULT '410';
ALTER TABLE queues ADD COLUMN deadline REAL;

ALTER TABLE tasks ADD COLUMN stop_on TEXT;
ALTER TABLE tasks ADD COLUMN deadline REAL;
ALTER TABLE tasks ADD COLUMN min_backoff REAL;
ALTER TABLE tasks ADD COLUMN max_backoff REAL;
ALTER TABLE tasks ADD COLUMN attempt_base INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN budget_at INTEGER;
ALTER TABLE tasks ADD COLUMN callback_url TEXT;
ALTER TABLE tasks ADD COLUMN failure_callback_url TEXT;
ALTER TABLE tasks ADD COLUMN callback_of TEXT;
ALTER TABLE tasks ADD COLUMN callback_due INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN callback_seq INTEGER NOT NULL DEFAULT 0;
CREATE INDEX tasks_callback_due ON tasks (seq) WHERE callback_due;

ALTER TABLE events ADD COLUMN callback_url TEXT;
ALTER TABLE events ADD COLUMN failure_callback_url TEXT;

CREATE TABLE operations (
    seq              INTEGER PRIMARY KEY AUTOINCREMENT,
    id               TEXT NOT NULL UNIQUE,
    action           TEXT NOT NULL CHECK (action IN ('retry', 'cancel')),
    filter           TEXT NOT NULL,
    state            TEXT NOT NULL DEFAULT 'running' CHECK (state IN ('running', 'succeeded', 'failed')),
    matched          INTEGER NOT NULL DEFAULT 0,
    changed          INTEGER NOT NULL DEFAULT 0,
    skipped          INTEGER NOT NULL DEFAULT 0,
    after_seq        INTEGER NOT NULL DEFAULT 0,
    upto_seq         INTEGER NOT NULL,
    error            TEXT,
    lease_token      TEXT,
    lease_expires_at INTEGER,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    finished_at      INTEGER
);
CREATE INDEX operations_running ON operations (seq) WHERE state = 'running';

DROP VIEW task_view;
CREATE VIEW task_view AS
SELECT t.seq, t.id, t.queue, t.status, t.url, t.method, t.headers, t.body,
       coalesce(t.held_run_at, t.run_at) AS run_at, t.priority,
       t.key, t.tenant, t.idempotency_key, t.attempts,
       coalesce(t.max_attempts, q.max_attempts) AS max_attempts,
       coalesce(t.timeout, q.timeout) AS timeout,
       t.last_status_code, t.last_error, t.created_at, t.updated_at, t.event_id, t.endpoint_id,
       coalesce(t.stop_on, q.stop_on) AS stop_on, coalesce(t.deadline, q.deadline) AS deadline,
       coalesce(t.min_backoff, q.min_backoff) AS min_backoff,
       coalesce(t.max_backoff, q.max_backoff) AS max_backoff,
       t.callback_url, t.failure_callback_url, t.callback_of
FROM tasks t
JOIN queues q ON q.name = t.queue;
