-- Bulk operations and callbacks for SQLite (see postgres/sql/operations.sql; workly/operations.py,
-- service/callbacks.py). The task filter (:queue … :last_status_code; NULL: any) is written
-- out in each query that needs it. What only reads tasks (the count, a chunk's tasks) runs on
-- the reader connection, so the single writer is not held while it scans.

-- name: insert_operation_count
-- On the reader, one statement (one snapshot): the newest task, and how many up to it match.
SELECT u.upto,
       (SELECT count(*) FROM tasks t
        WHERE t.seq <= u.upto
          AND (:queue IS NULL OR t.queue = :queue)
          AND (:endpoint_id IS NULL OR t.endpoint_id = :endpoint_id)
          AND (:event_type IS NULL
               OR EXISTS (SELECT 1 FROM events e WHERE e.id = t.event_id AND e.type = :event_type))
          AND (:tenant IS NULL OR t.tenant = :tenant)
          AND (:key IS NULL OR t.key = :key)
          AND (:status IS NULL OR t.status = :status)
          AND (:created_after IS NULL OR t.created_at >= :created_after)
          AND (:created_before IS NULL OR t.created_at < :created_before)
          AND (:last_status_code IS NULL OR t.last_status_code = :last_status_code)) AS matched
FROM (SELECT coalesce(max(seq), 0) AS upto FROM tasks) u;

-- name: insert_operation
INSERT INTO operations (id, action, filter, upto_seq, matched, created_at, updated_at)
VALUES (:id, :action, :filter, :upto_seq, :matched, :now, :now)
RETURNING *;

-- name: get_operation
SELECT * FROM operations WHERE id = :id;

-- name: list_operations
SELECT * FROM operations WHERE seq < :before ORDER BY seq DESC LIMIT :limit;

-- name: take_operation
-- A running operation no process works on (never taken, or its lease expired: the
-- process died between chunks).
UPDATE operations
SET lease_token = :lease_token, lease_expires_at = :lease_until
WHERE seq = (SELECT seq FROM operations
             WHERE state = 'running' AND (lease_expires_at IS NULL OR lease_expires_at < :now)
             ORDER BY seq LIMIT 1)
RETURNING *;

-- name: release_operation
-- A runner that stops (its process shuts down) between chunks gives the operation back at
-- once, so that a restart or another process resumes it without waiting for the lease.
UPDATE operations SET lease_token = NULL, lease_expires_at = NULL
WHERE id = :id AND lease_token = :lease_token AND state = 'running'
RETURNING seq;

-- name: lock_operation
-- The first statement of a chunk's transaction: the operation, if this runner still holds
-- it and it is where the chunk was read from (the chunk's tasks were read on the reader;
-- BEGIN IMMEDIATE keeps every other writer out until the chunk commits).
SELECT * FROM operations
WHERE id = :id AND lease_token = :lease_token AND state = 'running' AND after_seq = :after_seq;

-- name: operation_chunk_operation
-- On the reader: where the operation stands, to read its next chunk from there.
SELECT * FROM operations WHERE id = :id AND lease_token = :lease_token AND state = 'running';

-- name: operation_chunk
-- The next tasks the filter matches, in seq order after the last chunk.
SELECT t.seq, t.queue FROM tasks t
WHERE t.seq > :after_seq AND t.seq <= :upto_seq
  AND (:queue IS NULL OR t.queue = :queue)
  AND (:endpoint_id IS NULL OR t.endpoint_id = :endpoint_id)
  AND (:event_type IS NULL
       OR EXISTS (SELECT 1 FROM events e WHERE e.id = t.event_id AND e.type = :event_type))
  AND (:tenant IS NULL OR t.tenant = :tenant)
  AND (:key IS NULL OR t.key = :key)
  AND (:status IS NULL OR t.status = :status)
  AND (:created_after IS NULL OR t.created_at >= :created_after)
  AND (:created_before IS NULL OR t.created_at < :created_before)
  AND (:last_status_code IS NULL OR t.last_status_code = :last_status_code)
ORDER BY t.seq
LIMIT :chunk;

-- name: retry_tasks
-- A chunk's redrive (see postgres/sql/operations.sql).
UPDATE tasks
SET status = 'ready', attempt_base = attempts, budget_at = :now, updated_at = :now,
    url = coalesce((SELECT e.url FROM endpoints e WHERE e.id = tasks.endpoint_id), url),
    run_at = CASE WHEN o.open THEN :held_until ELSE :now END,
    held_run_at = CASE WHEN o.open THEN :now END
FROM (
    SELECT t.seq, EXISTS (SELECT 1 FROM breakers b WHERE b.key = t.breaker AND b.position = 'open') AS open
    FROM tasks t WHERE t.seq IN (SELECT value FROM json_each(:seqs))
) AS o
WHERE tasks.seq = o.seq AND status IN ('failed', 'canceled')
  AND NOT EXISTS (SELECT 1 FROM queues rq WHERE rq.name = tasks.queue AND rq.retired)  -- a deleted endpoint's
RETURNING seq;

-- name: cancel_tasks
UPDATE tasks
SET status = 'canceled', run_at = coalesce(held_run_at, run_at), held_run_at = NULL, updated_at = :now
WHERE seq IN (SELECT value FROM json_each(:seqs)) AND status = 'ready'
RETURNING seq;

-- name: advance_operation
-- The chunk's progress, in its transaction. The last chunk finishes the operation; what
-- it matched is then what it went through (a task deleted meanwhile is not counted).
UPDATE operations
SET after_seq = :after_seq, changed = changed + :changed, skipped = skipped + :skipped,
    lease_expires_at = :lease_until, updated_at = :now,
    state = CASE WHEN :done THEN 'succeeded' ELSE state END,
    finished_at = CASE WHEN :done THEN :now END,
    matched = CASE WHEN :done THEN changed + :changed + skipped + :skipped ELSE matched END
WHERE id = :id
RETURNING *;

-- name: due_callbacks
-- Finished tasks with a callback to send, oldest first, with their last attempt (that is
-- not stale): the callback carries it and its response.
SELECT v.*, t.callback_seq, a.attempt AS a_attempt, a.started_at AS a_started_at, a.finished_at AS a_finished_at,
       a.status_code AS a_status_code, a.error AS a_error, a.response AS a_response,
       a.stale AS a_stale
FROM (SELECT seq FROM tasks WHERE callback_due AND status IN ('succeeded', 'failed')
      ORDER BY seq LIMIT :limit) d
JOIN task_view v ON v.seq = d.seq
JOIN tasks t ON t.seq = d.seq
LEFT JOIN attempts a ON a.id = (SELECT max(a2.id) FROM attempts a2 WHERE a2.task_seq = d.seq AND NOT a2.stale);

-- name: clear_callbacks
-- Sent: only if the task has not finished again since (see postgres/sql/operations.sql).
-- :sent is a JSON array of [task id, callback_seq].
UPDATE tasks
SET callback_due = 0
WHERE (id, callback_seq) IN (SELECT value ->> '$[0]', value ->> '$[1]' FROM json_each(:sent)) AND callback_due
RETURNING seq;

-- name: insert_replay_operation
-- See the PostgreSQL query.
INSERT INTO operations (id, action, filter, upto_seq, matched, created_at, updated_at)
SELECT :id, 'replay', :filter, u.upto,
       CASE WHEN ep.tenant IS NULL
            THEN (SELECT count(*) FROM events e
                  WHERE e.tenant IS NULL AND e.seq <= u.upto AND e.created_at >= :created_after)
            ELSE (SELECT count(*) FROM events e
                  WHERE e.tenant = ep.tenant AND e.seq <= u.upto AND e.created_at >= :created_after)
       END,
       :now, :now
FROM (SELECT coalesce(max(seq), 0) AS upto FROM events) u
JOIN endpoints ep ON ep.id = :endpoint_id
RETURNING *;

-- name: lock_replay_endpoint
-- SQLite's writer holds the whole database: reading the row is enough.
SELECT id, url, headers, event_types, filter, payload_format, tenant FROM endpoints WHERE id = :id;

-- name: replay_events
SELECT seq, id, type, tenant, labels, payload, content_type, run_at, created_at, key,
       callback_url, failure_callback_url
FROM events
WHERE tenant = :tenant AND seq > :after_seq AND seq <= :upto_seq AND created_at >= :since
ORDER BY seq LIMIT :chunk;

-- name: replay_events_untenanted
SELECT seq, id, type, tenant, labels, payload, content_type, run_at, created_at, key,
       callback_url, failure_callback_url
FROM events
WHERE tenant IS NULL AND seq > :after_seq AND seq <= :upto_seq AND created_at >= :since
ORDER BY seq LIMIT :chunk;

-- name: replay_deliveries
-- Run with executemany, one row per event the endpoint takes (see the PostgreSQL query).
INSERT INTO tasks (id, queue, status, url, method, headers, body, run_at, held_run_at, priority, key,
                   created_at, updated_at, event_id, endpoint_id, breaker, callback_url, failure_callback_url)
SELECT :task_id, :endpoint_id, 'ready', :url, 'POST', :headers, :body,
       CASE WHEN b.open THEN :held_until ELSE max(e.run_at, :now) END,
       CASE WHEN b.open THEN max(e.run_at, :now) END, 0, e.key, :now, :now, e.id,
       :endpoint_id, :endpoint_id, e.callback_url, e.failure_callback_url
FROM events e
CROSS JOIN (SELECT EXISTS (SELECT 1 FROM breakers WHERE key = :endpoint_id AND position = 'open') AS open) b
WHERE e.id = :event_id
  AND NOT EXISTS (SELECT 1 FROM tasks t WHERE t.event_id = :event_id AND t.endpoint_id = :endpoint_id);

-- name: fail_operation
UPDATE operations
SET state = 'failed', error = :error, finished_at = :now, updated_at = :now,
    matched = changed + skipped
WHERE id = :id
RETURNING *;

-- name: running_replay
SELECT id FROM operations
WHERE state = 'running' AND action = 'replay' AND json_extract(filter, '$.endpoint_id') = :endpoint_id
LIMIT 1;
