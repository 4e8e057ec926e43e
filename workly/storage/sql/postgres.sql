-- Workly queries for PostgreSQL. Every query named here exists in sqlite.sql too.
-- Times come from the caller ($now), never from now(), so tests control the clock.

-- name: enqueue_tasks
-- The whole enqueue in one statement, so it needs no BEGIN/COMMIT round trips: create
-- missing queues (in name order, so concurrent creators cannot deadlock), insert the
-- tasks in input order (the FIFO order), and return them as task_view shows them.
-- Rows whose idempotency key or id is taken are skipped (ON CONFLICT) and not returned;
-- the caller then reads the existing ones. A queue created by this statement is read from
-- new_queues: the statement's snapshot cannot see it in queues.
WITH new_queues AS (
    INSERT INTO queues (name, created_at, updated_at)
    SELECT name, $1, $1 FROM (SELECT DISTINCT unnest($3::text[]) AS name) AS wanted ORDER BY name
    ON CONFLICT (name) DO NOTHING
    RETURNING name, max_attempts, timeout
),
inserted AS (
    INSERT INTO tasks (id, queue, status, url, method, headers, body, run_at, priority, key, tenant,
                       idempotency_key, max_attempts, timeout, created_at, updated_at)
    SELECT r.id, r.queue, 'ready', r.url, r.method, r.headers::json, r.body, coalesce(r.run_at, $1),
           r.priority, r.key, r.tenant, r.idempotency_key, r.max_attempts, r.timeout, $1, $1
    FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::bytea[],
                $8::timestamptz[], $9::int[], $10::text[], $11::text[], $12::text[], $13::int[],
                $14::float8[])
         WITH ORDINALITY AS r(id, queue, url, method, headers, body, run_at, priority, key, tenant,
                              idempotency_key, max_attempts, timeout, ord)
    ORDER BY r.ord
    -- Any unique conflict: a taken idempotency key, or a task id stored by an earlier
    -- try of this same request (its commit went through, its answer did not).
    ON CONFLICT DO NOTHING
    RETURNING *
)
-- The same columns as task_view. Both joins miss only a queue that another transaction
-- created concurrently; the caller re-reads such rows.
SELECT i.seq, i.id, i.queue, i.status, i.url, i.method, i.headers, i.body, i.run_at, i.priority,
       i.key, i.tenant, i.idempotency_key, i.attempts,
       coalesce(i.max_attempts, q.max_attempts, n.max_attempts) AS max_attempts,
       coalesce(i.timeout, q.timeout, n.timeout) AS timeout,
       i.last_status_code, i.last_error, i.created_at, i.updated_at
FROM inserted i
LEFT JOIN queues q ON q.name = i.queue
LEFT JOIN new_queues n ON n.name = i.queue;

-- name: get_tasks_by_ids
SELECT * FROM task_view WHERE id = ANY($1::text[]);

-- name: get_tasks_by_idempotency_keys
SELECT * FROM task_view
WHERE (queue, idempotency_key) IN (SELECT * FROM unnest($1::text[], $2::text[]));

-- name: get_task
SELECT * FROM task_view WHERE id = $1;

-- name: list_tasks
SELECT * FROM task_view WHERE queue = $1 AND seq < $2 ORDER BY seq DESC LIMIT $3;

-- name: list_tasks_by_status
SELECT * FROM task_view WHERE queue = $1 AND status = $2 AND seq < $3 ORDER BY seq DESC LIMIT $4;

-- name: list_attempts
SELECT t.id AS task_id, a.attempt, a.started_at, a.finished_at, a.status_code, a.error,
       a.response, a.stale
FROM attempts a JOIN tasks t ON t.seq = a.task_seq
WHERE t.id = $1
ORDER BY a.id;

-- name: cancel_task
UPDATE tasks SET status = 'canceled', updated_at = $2
WHERE id = $1 AND status = 'ready'
RETURNING seq;

-- name: retry_task
UPDATE tasks SET status = 'ready', attempts = 0, run_at = $2, updated_at = $2
WHERE id = $1 AND status IN ('failed', 'canceled')
RETURNING seq;

-- name: claim_tasks
-- $1 now, $2 batch size, $3 lease token, $4 lease margin (s), $5/$6 the caller's
-- deliveries in flight per queue (names, counts).
-- One statement: per unpaused queue with free concurrency, a LATERAL index scan
-- (tasks_claim, in its own order) locks at most min(free, batch) due rows with
-- SKIP LOCKED; the best $2 of those across queues become running.
-- Free concurrency comes from the caller, not from counting running rows: without a
-- timely VACUUM an index over status keeps one entry per past claim, and that count
-- grew with every task ever delivered (3 ms per claim after 10,000 tasks).
WITH open_queues AS (
    SELECT name, free
    FROM (
        SELECT q.name, q.max_concurrency - coalesce(b.n, 0) AS free
        FROM queues q
        LEFT JOIN unnest($5::text[], $6::int[]) AS b(queue, n) ON b.queue = q.name
        WHERE NOT q.paused
    ) s
    WHERE free > 0
),
candidates AS (
    SELECT c.seq, c.priority, c.run_at
    FROM open_queues o
    CROSS JOIN LATERAL (
        SELECT t.seq, t.priority, t.run_at
        FROM tasks t
        WHERE t.queue = o.name AND t.status = 'ready' AND t.run_at <= $1
        ORDER BY t.priority DESC, t.run_at, t.seq
        LIMIT least(greatest(o.free, 0), $2)
        FOR UPDATE SKIP LOCKED
    ) c
    ORDER BY c.priority DESC, c.run_at, c.seq
    LIMIT $2
)
UPDATE tasks t
SET status = 'running',
    attempts = t.attempts + 1,
    lease_token = $3,
    lease_expires_at = $1 + make_interval(secs => coalesce(t.timeout, q.timeout) + $4),
    updated_at = $1
FROM candidates c, queues q
WHERE t.seq = c.seq AND q.name = t.queue
RETURNING t.seq, t.id, t.queue, t.url, t.method, t.headers, t.body, t.attempts AS attempt,
          coalesce(t.max_attempts, q.max_attempts) AS max_attempts,
          coalesce(t.timeout, q.timeout) AS timeout, q.min_backoff, q.max_backoff,
          t.priority, t.run_at;

-- name: record_results
-- One statement per batch: update the tasks whose lease is still ours, then keep
-- every attempt, marking those whose lease was lost as stale (the fence).
WITH r AS (
    SELECT *
    FROM unnest($1::bigint[], $2::text[], $3::int[], $4::timestamptz[], $5::timestamptz[],
                $6::int[], $7::text[], $8::bytea[], $9::text[], $10::timestamptz[])
         AS r(task_seq, lease_token, attempt, started_at, finished_at, status_code, error,
              response, outcome, next_run_at)
),
updated AS (
    UPDATE tasks t
    SET status = CASE r.outcome WHEN 'retry' THEN 'ready' ELSE r.outcome END,
        run_at = CASE r.outcome WHEN 'retry' THEN r.next_run_at ELSE t.run_at END,
        last_status_code = r.status_code,
        last_error = r.error,
        lease_token = NULL,
        lease_expires_at = NULL,
        updated_at = $11
    FROM r
    WHERE t.seq = r.task_seq AND t.lease_token = r.lease_token AND t.status = 'running'
    RETURNING t.seq
)
INSERT INTO attempts (task_seq, attempt, started_at, finished_at, status_code, error, response, stale)
SELECT r.task_seq, r.attempt, r.started_at, r.finished_at, r.status_code, r.error, r.response,
       NOT EXISTS (SELECT 1 FROM updated u WHERE u.seq = r.task_seq)
FROM r
WHERE EXISTS (SELECT 1 FROM tasks t WHERE t.seq = r.task_seq)
RETURNING stale;

-- name: get_queue
SELECT * FROM queues WHERE name = $1;

-- name: get_queue_for_update
SELECT * FROM queues WHERE name = $1 FOR UPDATE;

-- name: list_queues
SELECT * FROM queues ORDER BY name;

-- name: count_tasks_of_queue
SELECT queue, status, count(*) AS n FROM tasks WHERE queue = $1 GROUP BY queue, status;

-- name: count_tasks
SELECT queue, status, count(*) AS n FROM tasks GROUP BY queue, status;

-- name: put_queue
INSERT INTO queues (name, max_concurrency, rate_limit, max_attempts, min_backoff, max_backoff,
                    timeout, ordering, paused, created_at, updated_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10)
ON CONFLICT (name) DO UPDATE
SET max_concurrency = excluded.max_concurrency, rate_limit = excluded.rate_limit,
    max_attempts = excluded.max_attempts, min_backoff = excluded.min_backoff,
    max_backoff = excluded.max_backoff, timeout = excluded.timeout,
    ordering = excluded.ordering, paused = excluded.paused, updated_at = excluded.updated_at
RETURNING (xmax = 0) AS created;

-- name: update_queue
UPDATE queues
SET max_concurrency = $2, rate_limit = $3, max_attempts = $4, min_backoff = $5, max_backoff = $6,
    timeout = $7, ordering = $8, paused = $9, updated_at = $10
WHERE name = $1;

-- name: delete_queue
DELETE FROM queues WHERE name = $1 RETURNING name;

-- name: purge_queue
WITH purged AS (DELETE FROM tasks WHERE queue = $1 AND status = 'ready' RETURNING 1)
SELECT count(*) FROM purged;

-- name: ping
SELECT 1;

-- name: announce_work
-- Its own statement after the enqueue committed: a NOTIFY inside the enqueue's
-- transaction would take a database-wide lock through that commit (seed 002).
-- $1 is "<kind>:<process id>": work, hello or bye (see postgres_wakeups.py).
SELECT pg_notify('workly_work', $1);

-- name: create_schema_version
CREATE TABLE IF NOT EXISTS schema_version (
    version    integer PRIMARY KEY,
    applied_at timestamptz NOT NULL DEFAULT now()
);

-- name: lock_migrations
-- Several processes may start at once (workly serve --workers N): one migrates.
SELECT pg_advisory_xact_lock(7337001);

-- name: get_schema_version
SELECT coalesce(max(version), 0) AS version FROM schema_version;

-- name: set_schema_version
INSERT INTO schema_version (version) VALUES ($1);

-- name: autovacuum_enabled
SELECT current_setting('autovacuum')::boolean AS enabled;

-- name: vacuum
-- SKIP_LOCKED: with several processes, whoever is first vacuums and the rest skip.
VACUUM (SKIP_LOCKED) tasks, attempts, queues;

-- name: reap_expired
-- $1 now, $2 batch size. Running tasks whose lease expired (their process died or
-- stalled) return to ready, due now, or fail when that attempt was their last; each
-- gets an attempt row saying so (the claim set updated_at, so it marks the start). A
-- result that later arrives under the old lease is refused by record_results' fence.
-- SKIP LOCKED: reapers in several processes split the work instead of waiting.
WITH expired AS (
    SELECT seq, updated_at AS claimed_at
    FROM tasks
    WHERE status = 'running' AND lease_expires_at < $1
    ORDER BY lease_expires_at
    LIMIT $2
    FOR UPDATE SKIP LOCKED
),
reaped AS (
    UPDATE tasks t
    SET status = CASE WHEN t.attempts >= coalesce(t.max_attempts, q.max_attempts) THEN 'failed'
                      ELSE 'ready' END,
        run_at = $1,
        last_status_code = NULL,
        last_error = 'lease expired: no result from the process that claimed it',
        lease_token = NULL,
        lease_expires_at = NULL,
        updated_at = $1
    FROM expired e, queues q
    WHERE t.seq = e.seq AND q.name = t.queue
    RETURNING t.seq, t.attempts, t.last_error
)
INSERT INTO attempts (task_seq, attempt, started_at, finished_at, status_code, error, response, stale)
SELECT r.seq, r.attempts, e.claimed_at, $1, NULL, r.last_error, '', false
FROM reaped r JOIN expired e ON e.seq = r.seq
RETURNING task_seq;

-- name: extend_leases
-- The heartbeat: $1 now, $2 lease margin (s), $3/$4 the (task, lease token) pairs in flight.
-- Only leases still held are extended; a lease the reaper took back stays lost (the fence).
UPDATE tasks t
SET lease_expires_at = $1::timestamptz + make_interval(secs => coalesce(t.timeout, q.timeout) + $2)
FROM unnest($3::bigint[], $4::text[]) AS l(seq, lease_token), queues q
WHERE t.seq = l.seq AND t.lease_token = l.lease_token AND t.status = 'running' AND q.name = t.queue
RETURNING t.seq;

-- name: prune_succeeded
-- Retention: $1 cutoff, $2 batch size. Small batches keep each transaction short; the
-- attempts go with their task (ON DELETE CASCADE). Failed tasks are never pruned.
WITH doomed AS (
    SELECT seq FROM tasks
    WHERE status = 'succeeded' AND updated_at < $1
    ORDER BY updated_at
    LIMIT $2
    FOR UPDATE SKIP LOCKED
)
DELETE FROM tasks t USING doomed d WHERE t.seq = d.seq
RETURNING t.seq;
