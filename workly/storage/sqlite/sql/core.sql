-- Workly queries for SQLite. Every query named here exists in postgres/sql/core.sql too, except
-- the parts of a query (named <query>_<part>) that SQLite runs as several statements.
-- Times are integer microseconds since the epoch; :now comes from the caller.
-- All writes run on the single writer connection inside BEGIN IMMEDIATE.

-- name: enqueue_tasks_ensure_queues
-- Run with executemany, once per distinct queue.
INSERT INTO queues (name, created_at, updated_at) VALUES (:queue, :now, :now)
ON CONFLICT (name) DO NOTHING;

-- name: enqueue_tasks_insert
-- Run with executemany inside one transaction: in-process, so no round trip per row. A
-- task whose breaker is open is held (see the PostgreSQL query).
-- The columns a NewTask gives (storage/task_shape.py), then the statement's own.
INSERT INTO tasks (@task_columns@, status, run_at, held_run_at, created_at, updated_at)
SELECT @task_params@, 'ready',
       CASE WHEN h.open THEN :held_until ELSE coalesce(:run_at, :now) END,
       CASE WHEN h.open THEN coalesce(:run_at, :now) END,
       :now, :now
FROM (SELECT EXISTS (SELECT 1 FROM breakers WHERE key = :breaker AND position = 'open') AS open) h;

-- name: enqueue_tasks_leasing_room
-- Eager dispatch (the PostgreSQL query says when an enqueue leases what it inserted): the
-- queues among :queues that qualify, and their room. One writer: the running count is
-- exact. sqlite/enqueue.py then picks within the room and leases with claim_tasks.
SELECT q.name,
       q.max_concurrency - (SELECT count(*) FROM tasks t INDEXED BY tasks_running
                            WHERE t.queue = q.name AND t.status = 'running') AS free
FROM queues q
WHERE q.name IN (SELECT value FROM json_each(:queues)) AND q.paused = 0 AND q.rate_limit IS NULL
  AND NOT EXISTS (SELECT 1 FROM breakers k WHERE k.key = q.name)
  AND NOT EXISTS (SELECT 1 FROM tasks w INDEXED BY tasks_queue_status
                  WHERE w.queue = q.name AND w.status = 'ready'
                    AND w.id NOT IN (SELECT value FROM json_each(:ids)));

-- name: enqueue_tasks_leasing_candidates
-- The inserted tasks that may be leased, in the order a claim would take them.
SELECT seq, queue FROM tasks
WHERE id IN (SELECT value FROM json_each(:ids)) AND status = 'ready' AND run_at <= :now
  AND tenant IS NULL AND key IS NULL AND held_run_at IS NULL
ORDER BY priority DESC, seq;

-- name: get_leased_tasks
-- The tasks among :ids running under :lease_token, as claim_tasks returns them: what an
-- enqueue whose caller did not learn its outcome leased (eager dispatch).
SELECT t.seq, t.id, t.queue, t.url, t.method, t.headers, t.body, t.attempts AS attempt,
       coalesce(t.max_attempts, q.max_attempts) AS max_attempts, coalesce(t.timeout, q.timeout) AS timeout,
       coalesce(t.min_backoff, q.min_backoff) AS min_backoff, coalesce(t.max_backoff, q.max_backoff) AS max_backoff,
       q.signing_secret, t.priority, t.run_at, t.event_id, t.endpoint_id, t.breaker, t.attempt_base,
       coalesce(t.stop_on, q.stop_on) AS stop_on, coalesce(t.deadline, q.deadline) AS deadline,
       coalesce(t.budget_at, t.created_at) AS budget_at,
       (t.callback_url IS NOT NULL OR t.failure_callback_url IS NOT NULL) AS capture_response,
       t.traceparent, t.tracestate
FROM tasks t JOIN queues q ON q.name = t.queue
WHERE t.id IN (SELECT value FROM json_each(:ids)) AND t.lease_token = :lease_token AND t.status = 'running'
ORDER BY t.priority DESC, t.seq;

-- name: get_tasks_by_ids
-- Also how an enqueue reads back what executemany inserted (it returns no rows).
SELECT * FROM task_view WHERE id IN (SELECT value FROM json_each(:ids));

-- name: get_tasks_by_idempotency_keys
-- :keys is a JSON array of [queue, idempotency_key] pairs. A join from the pairs, each
-- looked up in tasks_idempotency: with "(queue, idempotency_key) IN (SELECT ...)" SQLite
-- searched tasks_queue_seq by queue alone and read the queue's every task per enqueue
-- (the soak found it: at 50,000 tasks it was half the writer's time).
SELECT t.* FROM json_each(:keys) AS k
CROSS JOIN task_view t
WHERE t.queue = k.value ->> '$[0]' AND t.idempotency_key = k.value ->> '$[1]';

-- name: get_task
SELECT * FROM task_view WHERE id = :id;

-- name: list_tasks
SELECT * FROM task_view WHERE queue = :queue AND seq < :before ORDER BY seq DESC LIMIT :limit;

-- name: list_tasks_by_status
SELECT * FROM task_view
WHERE queue = :queue AND status = :status AND seq < :before
ORDER BY seq DESC LIMIT :limit;

-- name: list_all_tasks
SELECT * FROM task_view WHERE seq < :before ORDER BY seq DESC LIMIT :limit;

-- name: list_all_tasks_by_status_queues
-- Part of list_all_tasks_by_status: SQLite merges each queue's newest matches itself
-- (sqlite.py), reading only seqs from tasks_queue_status, then the page's rows.
SELECT name FROM queues ORDER BY name;

-- name: list_all_tasks_by_status_seqs
SELECT seq FROM tasks
WHERE queue = :queue AND status = :status AND seq < :before
ORDER BY seq DESC LIMIT :limit;

-- name: list_all_tasks_by_status_rows
SELECT * FROM task_view WHERE seq IN (SELECT value FROM json_each(:seqs)) ORDER BY seq DESC;

-- name: list_attempts
SELECT t.id AS task_id, a.attempt, a.started_at, a.finished_at, a.status_code, a.error,
       a.response, a.stale
FROM attempts a JOIN tasks t ON t.seq = a.task_seq
WHERE t.id = :id
ORDER BY a.id;

-- name: cancel_task
UPDATE tasks SET status = 'canceled', run_at = coalesce(held_run_at, run_at), held_run_at = NULL,
                 updated_at = :now
WHERE id = :id AND status = 'ready'
RETURNING seq;

-- name: retry_task
-- See postgres/sql/core.sql: redrive a failed or canceled task, or make a ready one due now.
UPDATE tasks
SET status = 'ready', updated_at = :now,
    attempt_base = CASE WHEN status = 'ready' THEN attempt_base ELSE attempts END,
    budget_at = CASE WHEN status = 'ready' THEN budget_at ELSE :now END,
    -- an event's delivery goes to its endpoint's URL of now
    url = CASE WHEN status = 'ready' THEN url
               ELSE coalesce((SELECT e.url FROM endpoints e WHERE e.id = tasks.endpoint_id), url) END,
    run_at = CASE WHEN (status = 'ready' AND held_run_at IS NULL) OR (status <> 'ready' AND NOT o.open)
                  THEN :now ELSE :held_until END,
    held_run_at = CASE WHEN (status = 'ready' AND held_run_at IS NULL) OR (status <> 'ready' AND NOT o.open)
                       THEN NULL ELSE :now END
FROM (SELECT EXISTS (SELECT 1 FROM breakers b JOIN tasks t ON b.key = t.breaker
                     WHERE t.id = :id AND b.position = 'open') AS open) AS o
WHERE id = :id AND status IN ('failed', 'canceled', 'ready')
  -- never in the retired queue of a deleted endpoint (nothing would send it)
  AND NOT EXISTS (SELECT 1 FROM queues rq WHERE rq.name = tasks.queue AND rq.retired)
RETURNING seq;

-- name: claim_tasks_open_queues
-- SQLite cannot take a LIMIT from an outer row (no LATERAL), so the claim is several
-- statements in one BEGIN IMMEDIATE transaction (sqlite/claim.py), applying the rules of
-- claim_rules.py that the PostgreSQL statement applies in SQL. It is in-process, so the
-- extra statements cost no round trips, and every scan is bounded by the batch size or
-- the number of tenants and keys with ready work, never by the backlog.
-- One writer: counting running tasks here is exact, no counter is needed.
-- An endpoint's queue is skipped while its breaker is open with no probe out, and runs one
-- delivery at a time while it is failing (as in the PostgreSQL claim).
SELECT q.name, q.rate_limit, q.rate_tokens, q.rate_at, q.ordering,
       CASE WHEN k.consecutive_failures > 0 THEN min(q.max_concurrency, 1)
            ELSE q.max_concurrency END AS max_concurrency,
       (SELECT count(*) FROM tasks t INDEXED BY tasks_running
        WHERE t.queue = q.name AND t.status = 'running') AS running
FROM queues q
LEFT JOIN breakers k ON k.key = q.name
WHERE q.paused = 0 AND (k.position IS NOT 'open' OR k.probe_seq IS NOT NULL)
  -- A queue with nothing ready has nothing to claim and no rate wait to report (as the
  -- PostgreSQL claim, which does not lock it).
  AND EXISTS (SELECT 1 FROM tasks w INDEXED BY tasks_queue_status WHERE w.queue = q.name AND w.status = 'ready')
ORDER BY q.name;

-- name: claim_tasks_plain
SELECT seq, priority, run_at
FROM tasks INDEXED BY tasks_claim
WHERE queue = :queue AND status = 'ready' AND tenant IS NULL AND key IS NULL AND run_at <= :now
ORDER BY priority DESC, run_at, seq
LIMIT :limit;

-- name: claim_tasks_tenants
-- A skip scan: one index descent per tenant with ready work, however deep its backlog.
WITH RECURSIVE g (tenant) AS (
    SELECT (SELECT tenant FROM tasks INDEXED BY tasks_claim_tenant
            WHERE queue = :queue AND status = 'ready' AND tenant IS NOT NULL AND key IS NULL
            ORDER BY tenant LIMIT 1)
    UNION ALL
    SELECT (SELECT tenant FROM tasks INDEXED BY tasks_claim_tenant
            WHERE queue = :queue AND status = 'ready' AND tenant IS NOT NULL AND key IS NULL
              AND tenant > g.tenant
            ORDER BY tenant LIMIT 1)
    FROM g WHERE g.tenant IS NOT NULL
)
SELECT g.tenant, m.last_served
FROM g LEFT JOIN queue_turns m ON m.queue = :queue AND m.tenant = g.tenant
WHERE g.tenant IS NOT NULL;

-- name: claim_tasks_by_tenant
SELECT seq, priority, run_at
FROM tasks INDEXED BY tasks_claim_tenant
WHERE queue = :queue AND tenant = :tenant AND status = 'ready' AND key IS NULL AND run_at <= :now
ORDER BY priority DESC, run_at, seq
LIMIT :limit;

-- name: claim_tasks_keys
WITH RECURSIVE g (key) AS (
    SELECT (SELECT key FROM tasks INDEXED BY tasks_claim_key
            WHERE queue = :queue AND status = 'ready' AND key IS NOT NULL
            ORDER BY key LIMIT 1)
    UNION ALL
    SELECT (SELECT key FROM tasks INDEXED BY tasks_claim_key
            WHERE queue = :queue AND status = 'ready' AND key IS NOT NULL AND key > g.key
            ORDER BY key LIMIT 1)
    FROM g WHERE g.key IS NOT NULL
)
SELECT key FROM g WHERE key IS NOT NULL;

-- name: claim_tasks_key_head
-- ordering=key: the key's oldest ready task, if it is due and none of the key runs.
SELECT h.seq, h.priority, h.run_at
FROM (SELECT seq, priority, run_at FROM tasks INDEXED BY tasks_claim_key
      WHERE queue = :queue AND key = :key AND status = 'ready'
      ORDER BY seq LIMIT 1) h
WHERE h.run_at <= :now
  AND NOT EXISTS (SELECT 1 FROM tasks r INDEXED BY tasks_running
                  WHERE r.queue = :queue AND r.key = :key AND r.status = 'running');

-- name: claim_tasks_by_key
-- ordering=none: a key is only a group to share turns between, in enqueue order.
SELECT seq, priority, run_at
FROM tasks INDEXED BY tasks_claim_key
WHERE queue = :queue AND key = :key AND status = 'ready' AND run_at <= :now
ORDER BY seq
LIMIT :limit;

-- name: claim_tasks_spend_tokens
UPDATE queues SET rate_tokens = :tokens, rate_at = :now WHERE name = :queue;

-- name: claim_tasks_served
INSERT INTO queue_turns (queue, tenant, last_served) VALUES (:queue, :tenant, :now)
ON CONFLICT (queue, tenant) DO UPDATE SET last_served = excluded.last_served;

-- name: claim_tasks
UPDATE tasks
SET status = 'running',
    attempts = attempts + 1,
    lease_token = :lease_token,
    lease_expires_at = :now + CAST(
        (coalesce(timeout, (SELECT q.timeout FROM queues q WHERE q.name = tasks.queue)) + :lease_margin)
        * 1000000 AS INTEGER),
    updated_at = :now
WHERE seq IN (SELECT value FROM json_each(:seqs))
RETURNING seq, id, queue, url, method, headers, body, attempts AS attempt,
          coalesce(max_attempts, (SELECT q.max_attempts FROM queues q WHERE q.name = tasks.queue))
              AS max_attempts,
          coalesce(timeout, (SELECT q.timeout FROM queues q WHERE q.name = tasks.queue)) AS timeout,
          coalesce(min_backoff, (SELECT q.min_backoff FROM queues q WHERE q.name = tasks.queue)) AS min_backoff,
          coalesce(max_backoff, (SELECT q.max_backoff FROM queues q WHERE q.name = tasks.queue)) AS max_backoff,
          (SELECT q.signing_secret FROM queues q WHERE q.name = tasks.queue) AS signing_secret,
          priority, run_at, event_id, endpoint_id, breaker, attempt_base,
          coalesce(stop_on, (SELECT q.stop_on FROM queues q WHERE q.name = tasks.queue)) AS stop_on,
          coalesce(deadline, (SELECT q.deadline FROM queues q WHERE q.name = tasks.queue)) AS deadline,
          coalesce(budget_at, created_at) AS budget_at,
          (callback_url IS NOT NULL OR failure_callback_url IS NOT NULL) AS capture_response,
          traceparent, tracestate;

-- name: record_results
-- The fence: only tasks still running under the result's lease token are updated.
-- A retry behind an open breaker (not its probe, nor one this batch closes) is held.
UPDATE tasks
SET status = CASE r.outcome WHEN 'retry' THEN 'ready' ELSE r.outcome END,
    run_at = CASE WHEN r.outcome <> 'retry' THEN tasks.run_at
                  WHEN EXISTS (SELECT 1 FROM breakers b WHERE b.key = tasks.breaker AND b.position = 'open'
                   AND b.probe_seq IS NOT tasks.seq
                   AND b.key NOT IN (SELECT value FROM json_each(:ok_keys))) THEN :held_until
                  ELSE r.next_run_at END,
    held_run_at = CASE WHEN r.outcome = 'retry' AND EXISTS (SELECT 1 FROM breakers b WHERE b.key = tasks.breaker AND b.position = 'open'
                   AND b.probe_seq IS NOT tasks.seq
                   AND b.key NOT IN (SELECT value FROM json_each(:ok_keys))) THEN r.next_run_at END,
    last_status_code = r.status_code,
    last_error = r.error,
    lease_token = NULL,
    lease_expires_at = NULL,
    -- A task claimed after its deadline was not sent: its claim made no attempt.
    attempts = CASE WHEN r.sent THEN tasks.attempts ELSE tasks.attempts - 1 END,
    callback_due = CASE r.outcome WHEN 'succeeded' THEN tasks.callback_url IS NOT NULL
                                  WHEN 'failed' THEN tasks.failure_callback_url IS NOT NULL
                                  ELSE tasks.callback_due END,
    callback_seq = CASE WHEN (r.outcome = 'succeeded' AND tasks.callback_url IS NOT NULL)
                          OR (r.outcome = 'failed' AND tasks.failure_callback_url IS NOT NULL)
                        THEN tasks.callback_seq + 1 ELSE tasks.callback_seq END,
    updated_at = :now
FROM (
    SELECT value ->> '$.task_seq' AS task_seq, value ->> '$.lease_token' AS lease_token,
           value ->> '$.outcome' AS outcome, value ->> '$.next_run_at' AS next_run_at,
           value ->> '$.status_code' AS status_code, value ->> '$.error' AS error,
           value ->> '$.sent' AS sent
    FROM json_each(:results)
) AS r
WHERE tasks.seq = r.task_seq AND tasks.lease_token = r.lease_token AND tasks.status = 'running'
RETURNING tasks.seq;

-- name: record_results_leases
-- Read first, in the same transaction: which (task, lease token) pairs are current. A batch
-- may hold a stale result and the current one of the same task (the reaper gave it to a
-- second claim meanwhile): only the current one is accepted.
SELECT seq, lease_token FROM tasks
WHERE seq IN (SELECT value FROM json_each(:seqs)) AND status = 'running';

-- name: record_results_attempts
INSERT INTO attempts (task_seq, attempt, started_at, finished_at, status_code, error, response, stale)
SELECT :task_seq, :attempt, :started_at, :finished_at, :status_code, :error, :response, :stale
WHERE EXISTS (SELECT 1 FROM tasks WHERE seq = :task_seq);

-- name: get_queue
SELECT * FROM queues WHERE name = :name;

-- name: get_queue_for_update
-- The writer connection's BEGIN IMMEDIATE already excludes every other writer.
SELECT * FROM queues WHERE name = :name;

-- name: list_queues
-- Not the retired queues of deleted endpoints (lifecycle.sql).
SELECT * FROM queues WHERE NOT retired ORDER BY name;

-- name: count_tasks_of_queue
-- From task_counts, which triggers keep (migration 0014).
SELECT queue, status, n FROM task_counts WHERE queue = :queue;

-- name: count_tasks
SELECT queue, status, n FROM task_counts;

-- name: put_queue
INSERT INTO queues (name, max_concurrency, rate_limit, max_attempts, min_backoff, max_backoff,
                    timeout, ordering, paused, signing_secret, stop_on, deadline, retention, created_at, updated_at)
VALUES (:name, :max_concurrency, :rate_limit, :max_attempts, :min_backoff, :max_backoff,
        :timeout, :ordering, :paused, :signing_secret, :stop_on, :deadline, :retention, :now, :now)
ON CONFLICT (name) DO UPDATE
SET max_concurrency = excluded.max_concurrency, rate_limit = excluded.rate_limit,
    max_attempts = excluded.max_attempts, min_backoff = excluded.min_backoff,
    max_backoff = excluded.max_backoff, timeout = excluded.timeout,
    ordering = excluded.ordering, paused = excluded.paused,
    signing_secret = excluded.signing_secret, stop_on = excluded.stop_on,
    deadline = excluded.deadline, retention = excluded.retention, updated_at = excluded.updated_at;

-- name: update_queue
UPDATE queues
SET max_concurrency = :max_concurrency, rate_limit = :rate_limit, max_attempts = :max_attempts,
    min_backoff = :min_backoff, max_backoff = :max_backoff, timeout = :timeout,
    ordering = :ordering, paused = :paused, signing_secret = :signing_secret, stop_on = :stop_on,
    deadline = :deadline, retention = :retention, updated_at = :now
WHERE name = :name;

-- name: delete_queue
DELETE FROM queues WHERE name = :name RETURNING name;

-- name: purge_queue
DELETE FROM tasks WHERE queue = :queue AND status = 'ready';

-- name: ping
SELECT 1;

-- name: create_schema_version
CREATE TABLE IF NOT EXISTS schema_version (
    version    INTEGER PRIMARY KEY,
    applied_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);

-- name: lock_migrations
-- Migrations run inside BEGIN IMMEDIATE, which already excludes other writers.
SELECT 1;

-- name: schema_version_exists
SELECT 1 AS found FROM sqlite_master WHERE type = 'table' AND name = 'schema_version';

-- name: get_schema_version
SELECT coalesce(max(version), 0) AS version FROM schema_version;

-- name: set_schema_version
INSERT INTO schema_version (version) VALUES (:version);

-- name: get_schema_repeatables
-- The repeatable files run, and the revision and content run (storage/migrator.py).
SELECT name, revision, sha256 FROM schema_repeatables;

-- name: set_schema_repeatable
INSERT INTO schema_repeatables (name, revision, sha256) VALUES (:name, :revision, :sha256)
ON CONFLICT (name) DO UPDATE
SET revision = excluded.revision, sha256 = excluded.sha256, applied_at = excluded.applied_at;

-- name: reap_expired_attempts
-- SQLite runs the reap as two statements in one BEGIN IMMEDIATE transaction: first the
-- attempt rows (the claim set updated_at, so it marks the start), then the tasks.
INSERT INTO attempts (task_seq, attempt, started_at, finished_at, status_code, error, response, stale)
SELECT seq, attempts, updated_at, :now, NULL,
       'lease expired: no result from the process that claimed it', X'', 0
FROM tasks INDEXED BY tasks_lease
WHERE status = 'running' AND lease_expires_at < :now
ORDER BY lease_expires_at
LIMIT :limit
RETURNING task_seq;

-- name: reap_expired
-- Running tasks whose lease expired return to ready, due now, or fail when that attempt
-- was their last (see postgres/sql/core.sql). :seqs are the tasks the attempts were written for.
UPDATE tasks
SET status = CASE WHEN e.last THEN 'failed' ELSE 'ready' END,
    callback_due = CASE WHEN e.last THEN failure_callback_url IS NOT NULL ELSE callback_due END,
    callback_seq = CASE WHEN e.last AND failure_callback_url IS NOT NULL
                        THEN callback_seq + 1 ELSE callback_seq END,
    -- Behind an open breaker (not as its probe): held, as enqueue_tasks_insert holds.
    run_at = CASE WHEN e.held THEN :held_until ELSE :now END,
    held_run_at = CASE WHEN e.held THEN :now END,
    last_status_code = NULL,
    last_error = 'lease expired: no result from the process that claimed it',
    lease_token = NULL,
    lease_expires_at = NULL,
    updated_at = :now
FROM (
    SELECT t.seq,
           t.attempts - t.attempt_base >= coalesce(t.max_attempts, q.max_attempts) AS last,
           EXISTS (SELECT 1 FROM breakers b WHERE b.key = t.breaker AND b.position = 'open'
                   AND b.probe_seq IS NOT t.seq) AS held
    FROM tasks t JOIN queues q ON q.name = t.queue
    WHERE t.seq IN (SELECT value FROM json_each(:seqs))
) AS e
WHERE tasks.seq = e.seq;

-- name: extend_leases
-- The heartbeat (see postgres/sql/core.sql). :leases is a JSON array of [task seq, lease token].
-- A lease only moves forward, as there.
UPDATE tasks
SET lease_expires_at = max(lease_expires_at, :now + CAST(
        (coalesce(timeout, (SELECT q.timeout FROM queues q WHERE q.name = tasks.queue)) + :lease_margin)
        * 1000000 AS INTEGER))
WHERE (seq, lease_token) IN (SELECT value ->> '$[0]', value ->> '$[1]' FROM json_each(:leases))
  AND status = 'running'
RETURNING seq, lease_token;
