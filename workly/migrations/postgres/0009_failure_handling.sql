-- Failure handling (docs/failures.md): retry policies, continuous attempt numbers,
-- callbacks, and bulk operations.

-- stop_on: status codes and classes after which a task fails without a retry, comma
-- separated ("410,4xx"). deadline: seconds after a task's creation (or redrive) after
-- which no attempt starts; NULL: none.
ALTER TABLE queues
    ADD COLUMN stop_on  text NOT NULL DEFAULT '410',
    ADD COLUMN deadline double precision;

-- A task's own retry policy (NULL: its queue's). attempt_base: the attempts made before
-- its last redrive (max_attempts counts after it); budget_at: when that redrive happened
-- (its deadline counts from it; NULL: from created_at). callback_due: it finished with a
-- callback to send (service/callbacks.py sends it and clears the flag); callback_seq counts
-- the outcomes that made one due, so each has a callback of its own.
ALTER TABLE tasks
    ADD COLUMN stop_on              text,
    ADD COLUMN deadline             double precision,
    ADD COLUMN min_backoff          double precision,
    ADD COLUMN max_backoff          double precision,
    ADD COLUMN attempt_base         integer NOT NULL DEFAULT 0,
    ADD COLUMN budget_at            timestamptz,
    ADD COLUMN callback_url         text,
    ADD COLUMN failure_callback_url text,
    ADD COLUMN callback_of          text,
    ADD COLUMN callback_due         boolean NOT NULL DEFAULT false,
    ADD COLUMN callback_seq         integer NOT NULL DEFAULT 0;
CREATE INDEX tasks_callback_due ON tasks (seq) WHERE callback_due;

-- An event's callbacks, given to each of its deliveries.
ALTER TABLE events
    ADD COLUMN callback_url         text,
    ADD COLUMN failure_callback_url text;

-- A bulk retry or cancel (service/operations.py). It works through the tasks its filter
-- matches in chunks, in seq order up to upto_seq (the newest task when it was created):
-- after_seq is how far it got, written in the transaction that changes each chunk, so a
-- restart resumes exactly there. The process working on it holds a lease.
CREATE TABLE operations (
    seq              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id               text NOT NULL UNIQUE,
    action           text NOT NULL CHECK (action IN ('retry', 'cancel')),
    filter           json NOT NULL,
    state            text NOT NULL DEFAULT 'running' CHECK (state IN ('running', 'succeeded', 'failed')),
    matched          bigint NOT NULL DEFAULT 0,
    changed          bigint NOT NULL DEFAULT 0,
    skipped          bigint NOT NULL DEFAULT 0,
    after_seq        bigint NOT NULL DEFAULT 0,
    upto_seq         bigint NOT NULL,
    error            text,
    lease_token      text,
    lease_expires_at timestamptz,
    created_at       timestamptz NOT NULL,
    updated_at       timestamptz NOT NULL,
    finished_at      timestamptz
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
