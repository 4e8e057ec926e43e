-- Workly schema, version 1 (PostgreSQL). Times are timestamptz; bodies are bytea.

CREATE TABLE queues (
    name            text PRIMARY KEY,
    max_concurrency integer NOT NULL DEFAULT 3,
    rate_limit      double precision,
    max_attempts    integer NOT NULL DEFAULT 10,
    min_backoff     double precision NOT NULL DEFAULT 1,
    max_backoff     double precision NOT NULL DEFAULT 3600,
    timeout         double precision NOT NULL DEFAULT 30,
    ordering        text NOT NULL DEFAULT 'none' CHECK (ordering IN ('none', 'key')),
    paused          boolean NOT NULL DEFAULT false,
    created_at      timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL
);

CREATE TABLE tasks (
    seq              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id               text NOT NULL UNIQUE,
    queue            text NOT NULL REFERENCES queues (name) ON DELETE CASCADE,
    status           text NOT NULL
                     CHECK (status IN ('ready', 'running', 'succeeded', 'failed', 'canceled')),
    url              text NOT NULL,
    method           text NOT NULL,
    headers          json NOT NULL,  -- json, not jsonb: keeps the caller's header order
    body             bytea NOT NULL,
    run_at           timestamptz NOT NULL,
    priority         integer NOT NULL DEFAULT 0,
    key              text,
    tenant           text,
    idempotency_key  text,
    max_attempts     integer,
    timeout          double precision,
    attempts         integer NOT NULL DEFAULT 0,
    last_status_code integer,
    last_error       text,
    lease_token      text,
    lease_expires_at timestamptz,
    created_at       timestamptz NOT NULL,
    updated_at       timestamptz NOT NULL
);

-- A queue table churns: every task is inserted, claimed and finished, three row versions
-- each. Vacuum it early, or dead index entries pile up in front of the claim's scan
-- (seed 001). Workly also vacuums it itself when the server's autovacuum is off.
ALTER TABLE tasks SET (autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_threshold = 1000,
                       autovacuum_analyze_scale_factor = 0.02);

-- The claim reads ready rows in exactly this order, so the scan stops after the
-- batch however deep the backlog is (seed 000: a mismatched index sorts it all).
CREATE INDEX tasks_claim ON tasks (queue, priority DESC, run_at, seq) WHERE status = 'ready';
-- Listing a queue newest first, optionally by status; also counts running tasks per queue.
CREATE INDEX tasks_queue_status ON tasks (queue, status, seq);
CREATE INDEX tasks_queue_seq ON tasks (queue, seq);
CREATE UNIQUE INDEX tasks_idempotency ON tasks (queue, idempotency_key) WHERE idempotency_key IS NOT NULL;

CREATE TABLE attempts (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    task_seq     bigint NOT NULL REFERENCES tasks (seq) ON DELETE CASCADE,
    attempt      integer NOT NULL,
    started_at   timestamptz NOT NULL,
    finished_at  timestamptz NOT NULL,
    status_code  integer,
    error        text,
    response     bytea NOT NULL,
    stale        boolean NOT NULL DEFAULT false
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
