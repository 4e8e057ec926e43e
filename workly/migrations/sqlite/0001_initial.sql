-- Workly schema, version 1 (SQLite). Times are integer microseconds since the Unix
-- epoch (UTC); headers are JSON text; bodies are blobs.

CREATE TABLE queues (
    name            TEXT PRIMARY KEY,
    max_concurrency INTEGER NOT NULL DEFAULT 3,
    rate_limit      REAL,
    max_attempts    INTEGER NOT NULL DEFAULT 10,
    min_backoff     REAL NOT NULL DEFAULT 1,
    max_backoff     REAL NOT NULL DEFAULT 3600,
    timeout         REAL NOT NULL DEFAULT 30,
    ordering        TEXT NOT NULL DEFAULT 'none' CHECK (ordering IN ('none', 'key')),
    paused          INTEGER NOT NULL DEFAULT 0,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL
);

CREATE TABLE tasks (
    seq              INTEGER PRIMARY KEY AUTOINCREMENT,
    id               TEXT NOT NULL UNIQUE,
    queue            TEXT NOT NULL REFERENCES queues (name) ON DELETE CASCADE,
    status           TEXT NOT NULL
                     CHECK (status IN ('ready', 'running', 'succeeded', 'failed', 'canceled')),
    url              TEXT NOT NULL,
    method           TEXT NOT NULL,
    headers          TEXT NOT NULL,
    body             BLOB NOT NULL,
    run_at           INTEGER NOT NULL,
    priority         INTEGER NOT NULL DEFAULT 0,
    key              TEXT,
    tenant           TEXT,
    idempotency_key  TEXT,
    max_attempts     INTEGER,
    timeout          REAL,
    attempts         INTEGER NOT NULL DEFAULT 0,
    last_status_code INTEGER,
    last_error       TEXT,
    lease_token      TEXT,
    lease_expires_at INTEGER,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL
);

-- The claim reads ready rows in exactly this order (see the Postgres migration).
CREATE INDEX tasks_claim ON tasks (queue, priority DESC, run_at, seq) WHERE status = 'ready';
CREATE INDEX tasks_queue_status ON tasks (queue, status, seq);
CREATE INDEX tasks_queue_seq ON tasks (queue, seq);
CREATE UNIQUE INDEX tasks_idempotency ON tasks (queue, idempotency_key) WHERE idempotency_key IS NOT NULL;

CREATE TABLE attempts (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    task_seq     INTEGER NOT NULL REFERENCES tasks (seq) ON DELETE CASCADE,
    attempt      INTEGER NOT NULL,
    started_at   INTEGER NOT NULL,
    finished_at  INTEGER NOT NULL,
    status_code  INTEGER,
    error        TEXT,
    response     BLOB NOT NULL,
    stale        INTEGER NOT NULL DEFAULT 0
);

CREATE INDEX attempts_task ON attempts (task_seq, id);

-- A task as the API shows it: the queue's settings fill in what the task leaves unset.
CREATE VIEW task_view AS
SELECT t.seq, t.id, t.queue, t.status, t.url, t.method, t.headers, t.body, t.run_at, t.priority,
       t.key, t.tenant, t.idempotency_key, t.attempts,
       coalesce(t.max_attempts, q.max_attempts) AS max_attempts,
       coalesce(t.timeout, q.timeout) AS timeout,
       t.last_status_code, t.last_error, t.created_at, t.updated_at
FROM tasks t
JOIN queues q ON q.name = t.queue;
