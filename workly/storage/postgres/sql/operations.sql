-- Bulk operations and callbacks for PostgreSQL (workly/operations.py, service/callbacks.py).
-- The task filter (:queue … :last_status_code; NULL: any) is written out in each query
-- that needs it.

-- name: insert_operation
-- It covers the tasks stored now (seq up to upto_seq); matched counts those its filter
-- matches. (A count, not a lock: nothing waits for it.)
INSERT INTO operations (id, action, filter, upto_seq, matched, created_at, updated_at)
SELECT :id, :action, :filter::json, u.upto,
       (SELECT count(*) FROM tasks t
        WHERE t.seq <= u.upto
          AND (:queue::text IS NULL OR t.queue = :queue)
          AND (:endpoint_id::text IS NULL OR t.endpoint_id = :endpoint_id)
          AND (:event_type::text IS NULL
               OR EXISTS (SELECT 1 FROM events e WHERE e.id = t.event_id AND e.type = :event_type))
          AND (:tenant::text IS NULL OR t.tenant = :tenant)
          AND (:key::text IS NULL OR t.key = :key)
          AND (:status::text IS NULL OR t.status = :status)
          AND (:created_after::timestamptz IS NULL OR t.created_at >= :created_after)
          AND (:created_before::timestamptz IS NULL OR t.created_at < :created_before)
          AND (:last_status_code::int IS NULL OR t.last_status_code = :last_status_code)),
       :now, :now
FROM (SELECT coalesce(max(seq), 0) AS upto FROM tasks) u
RETURNING *;

-- name: get_operation
SELECT * FROM operations WHERE id = :id;

-- name: list_operations
SELECT * FROM operations WHERE seq < :before ORDER BY seq DESC LIMIT :limit;

-- name: take_operation
-- A running operation no process works on (never taken, or its lease expired: the
-- process died between chunks). SKIP LOCKED: two runners never take the same one.
UPDATE operations
SET lease_token = :lease_token, lease_expires_at = :lease_until
WHERE seq = (SELECT seq FROM operations
             WHERE state = 'running' AND (lease_expires_at IS NULL OR lease_expires_at < :now)
             ORDER BY seq LIMIT 1
             FOR UPDATE SKIP LOCKED)
RETURNING *;

-- name: release_operation
-- A runner that stops (its process shuts down) between chunks gives the operation back at
-- once, so that a restart or another process resumes it without waiting for the lease.
UPDATE operations SET lease_token = NULL, lease_expires_at = NULL
WHERE id = :id AND lease_token = :lease_token AND state = 'running'
RETURNING seq;

-- name: lock_operation
-- The first statement of a chunk's transaction: the operation, if this runner still
-- holds it. Its row stays locked until the chunk commits with its progress.
SELECT * FROM operations
WHERE id = :id AND lease_token = :lease_token AND state = 'running'
FOR UPDATE;

-- name: operation_chunk
-- The next tasks the filter matches, in seq order after the last chunk.
SELECT t.seq, t.queue FROM tasks t
WHERE t.seq > :after_seq AND t.seq <= :upto_seq
  AND (:queue::text IS NULL OR t.queue = :queue)
  AND (:endpoint_id::text IS NULL OR t.endpoint_id = :endpoint_id)
  AND (:event_type::text IS NULL
       OR EXISTS (SELECT 1 FROM events e WHERE e.id = t.event_id AND e.type = :event_type))
  AND (:tenant::text IS NULL OR t.tenant = :tenant)
  AND (:key::text IS NULL OR t.key = :key)
  AND (:status::text IS NULL OR t.status = :status)
  AND (:created_after::timestamptz IS NULL OR t.created_at >= :created_after)
  AND (:created_before::timestamptz IS NULL OR t.created_at < :created_before)
  AND (:last_status_code::int IS NULL OR t.last_status_code = :last_status_code)
ORDER BY t.seq
LIMIT :chunk;

-- name: lock_queues_named
-- Before a chunk's retry: as lock_queue_of_task, so a claim that read a key's head before
-- this commits cannot also claim the key's next task.
SELECT name FROM queues WHERE name = ANY(:names::text[]) ORDER BY name FOR NO KEY UPDATE;

-- name: retry_tasks
-- A chunk's redrive, as retry_task does it for one task (the status is rechecked here:
-- a task that changed since the chunk was read is skipped).
UPDATE tasks t
SET status = 'ready', attempt_base = t.attempts, budget_at = :now, updated_at = :now,
    url = coalesce((SELECT e.url FROM endpoints e WHERE e.id = t.endpoint_id), t.url),
    run_at = CASE WHEN o.open THEN :held_until::timestamptz ELSE :now::timestamptz END,
    held_run_at = CASE WHEN o.open THEN :now::timestamptz END
FROM (
    SELECT t2.seq, EXISTS (SELECT 1 FROM breakers b WHERE b.key = t2.breaker AND b.position = 'open') AS open
    FROM tasks t2 WHERE t2.seq = ANY(:seqs::bigint[])
) AS o
WHERE t.seq = o.seq AND t.status IN ('failed', 'canceled')
  AND NOT EXISTS (SELECT 1 FROM queues rq WHERE rq.name = t.queue AND rq.retired)  -- a deleted endpoint's
RETURNING t.seq;

-- name: cancel_tasks
UPDATE tasks
SET status = 'canceled', run_at = coalesce(held_run_at, run_at), held_run_at = NULL, updated_at = :now
WHERE seq = ANY(:seqs::bigint[]) AND status = 'ready'
RETURNING seq;

-- name: advance_operation
-- The chunk's progress, in its transaction. The last chunk finishes the operation; what
-- it matched is then what it went through (a task deleted meanwhile is not counted).
UPDATE operations
SET after_seq = :after_seq, changed = changed + :changed, skipped = skipped + :skipped,
    lease_expires_at = :lease_until, updated_at = :now,
    state = CASE WHEN :done::boolean THEN 'succeeded' ELSE state END,
    finished_at = CASE WHEN :done::boolean THEN :now::timestamptz END,
    matched = CASE WHEN :done::boolean THEN changed + :changed + skipped + :skipped ELSE matched END
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
LEFT JOIN LATERAL (SELECT * FROM attempts a WHERE a.task_seq = d.seq AND NOT a.stale
                   ORDER BY a.id DESC LIMIT 1) a ON true;

-- name: clear_callbacks
-- Sent: only if the task has not finished again since (a redrive's outcome has its own,
-- with the next callback_seq).
UPDATE tasks t
SET callback_due = false
FROM unnest(:ids::text[], :callback_seqs::int[]) AS s(id, callback_seq)
WHERE t.id = s.id AND t.callback_seq = s.callback_seq AND t.callback_due
RETURNING t.seq;

-- name: insert_replay_operation
-- A replay (POST /v1/endpoints/{id}/replay) covers the events stored now (seq up to
-- upto_seq) of the endpoint's tenant created since :created_after; matched counts them.
-- No row: the endpoint does not exist.
INSERT INTO operations (id, action, filter, upto_seq, matched, created_at, updated_at)
SELECT :id, 'replay', :filter::json, u.upto,
       -- Two counts, so that each reads events_tenant (an OR of both would scan events).
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
-- A replay chunk's endpoint, locked until the chunk commits: two replays of one endpoint
-- take turns, and each sees the deliveries the other made.
SELECT id, url, headers, event_types, filter, payload_format, tenant FROM endpoints
WHERE id = :id FOR NO KEY UPDATE;

-- name: replay_events
-- The next events of a tenant's endpoint's replay, in seq order (events_tenant).
SELECT seq, id, type, tenant, labels::text AS labels, payload, content_type, run_at, created_at, key,
       callback_url, failure_callback_url
FROM events
WHERE tenant = :tenant AND seq > :after_seq AND seq <= :upto_seq AND created_at >= :since
ORDER BY seq LIMIT :chunk;

-- name: replay_events_untenanted
-- An untenanted endpoint's: the untenanted events (events_tenant too).
SELECT seq, id, type, tenant, labels::text AS labels, payload, content_type, run_at, created_at, key,
       callback_url, failure_callback_url
FROM events
WHERE tenant IS NULL AND seq > :after_seq AND seq <= :upto_seq AND created_at >= :since
ORDER BY seq LIMIT :chunk;

-- name: replay_deliveries
-- One delivery per given event the endpoint never received (rechecked here, after the
-- endpoint's lock: a publish commits its event and deliveries together); held while its
-- breaker is open, as a publish holds. A past event is due now.
INSERT INTO tasks (id, queue, status, url, method, headers, body, run_at, held_run_at, priority, key,
                   created_at, updated_at, event_id, endpoint_id, breaker, callback_url, failure_callback_url)
SELECT d.task_id, :endpoint_id, 'ready', :url, 'POST', d.headers::json, d.body,
       CASE WHEN b.open THEN :held_until::timestamptz ELSE greatest(e.run_at, :now::timestamptz) END,
       CASE WHEN b.open THEN greatest(e.run_at, :now::timestamptz) END, 0, e.key, :now, :now, e.id,
       :endpoint_id, :endpoint_id, e.callback_url, e.failure_callback_url
FROM unnest(:task_ids::text[], :event_ids::text[], :bodies::bytea[], :headers::text[])
     WITH ORDINALITY AS d(task_id, event_id, body, headers, ord)
JOIN events e ON e.id = d.event_id
CROSS JOIN (SELECT EXISTS (SELECT 1 FROM breakers WHERE key = :endpoint_id AND position = 'open') AS open) b
WHERE NOT EXISTS (SELECT 1 FROM tasks t WHERE t.event_id = d.event_id AND t.endpoint_id = :endpoint_id)
ORDER BY d.ord
RETURNING id;

-- name: fail_operation
-- An operation that cannot go on (its endpoint was deleted): finished, failed, with why.
UPDATE operations
SET state = 'failed', error = :error, finished_at = :now, updated_at = :now,
    matched = changed + skipped
WHERE id = :id
RETURNING *;

-- name: running_replay
-- A replay of this endpoint still running (the filter is kept as JSON text in a json value).
SELECT id FROM operations
WHERE state = 'running' AND action = 'replay'
  AND ((filter #>> '{}')::jsonb ->> 'endpoint_id') = :endpoint_id
LIMIT 1;
