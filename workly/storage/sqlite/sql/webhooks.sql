-- Workly's webhook platform queries for SQLite (see postgres/sql/webhooks.sql for what each
-- does). event_types is a JSON array; lists of keys and ids are JSON arrays.

-- name: insert_endpoint
INSERT INTO endpoints (id, url, description, event_types, tenant, headers, enabled, created_at, updated_at,
                       payload_format, filter)
VALUES (:id, :url, :description, :event_types, :tenant, :headers, 1, :now, :now, :payload_format, :filter);

-- name: get_endpoint
-- The endpoint, its health (its breaker) and its delivery settings (its queue's).
SELECT e.*, b.position, b.consecutive_failures, b.failing_since, b.last_success_at, b.probe_at,
       q.max_concurrency, q.rate_limit, q.max_attempts, q.min_backoff, q.max_backoff, q.timeout, q.ordering,
       q.paused, q.signing_secret, q.stop_on, q.deadline, q.retention
FROM endpoints e JOIN queues q ON q.name = e.id LEFT JOIN breakers b ON b.key = e.id
WHERE e.id = :id;

-- name: lock_endpoint
-- SQLite's writer holds the whole database: reading the row is enough.
SELECT id FROM endpoints WHERE id = :id;

-- name: list_endpoints
SELECT e.*, b.position, b.consecutive_failures, b.failing_since, b.last_success_at, b.probe_at,
       q.max_concurrency, q.rate_limit, q.max_attempts, q.min_backoff, q.max_backoff, q.timeout, q.ordering,
       q.paused, q.signing_secret, q.stop_on, q.deadline, q.retention
FROM endpoints e JOIN queues q ON q.name = e.id LEFT JOIN breakers b ON b.key = e.id
WHERE e.seq < :before
ORDER BY e.seq DESC LIMIT :limit;

-- name: list_endpoints_by_tenant
SELECT e.*, b.position, b.consecutive_failures, b.failing_since, b.last_success_at, b.probe_at,
       q.max_concurrency, q.rate_limit, q.max_attempts, q.min_backoff, q.max_backoff, q.timeout, q.ordering,
       q.paused, q.signing_secret, q.stop_on, q.deadline, q.retention
FROM endpoints e JOIN queues q ON q.name = e.id LEFT JOIN breakers b ON b.key = e.id
WHERE e.tenant = :tenant AND e.seq < :before
ORDER BY e.seq DESC LIMIT :limit;

-- name: update_endpoint
UPDATE endpoints
SET url = :url, description = :description, event_types = :event_types, tenant = :tenant,
    headers = :headers, updated_at = :now, payload_format = :payload_format, filter = :filter
WHERE id = :id;

-- name: update_endpoint_task_urls
UPDATE tasks SET url = :url WHERE queue = :id AND status = 'ready' AND url <> :url;

-- name: set_endpoint_enabled
UPDATE endpoints SET enabled = :enabled, disabled_reason = :reason, updated_at = :now WHERE id = :id;

-- name: set_queue_paused
UPDATE queues SET paused = :paused, updated_at = :now WHERE name = :name;

-- name: publish_targets
SELECT id, url, headers, event_types, filter, payload_format FROM endpoints
WHERE enabled = 1 AND tenant = :tenant
ORDER BY seq;

-- name: publish_targets_untenanted
SELECT id, url, headers, event_types, filter, payload_format FROM endpoints
WHERE enabled = 1 AND tenant IS NULL
ORDER BY seq;

-- name: publish_event
-- The event; its deliveries follow with publish_event_deliveries, in the same transaction.
INSERT INTO events (id, type, tenant, key, idempotency_key, payload, content_type, run_at, created_at,
                    callback_url, failure_callback_url, labels)
VALUES (:id, :type, :tenant, :key, :idempotency_key, :payload, :content_type, coalesce(:run_at, :now), :now,
        :callback_url, :failure_callback_url, :labels)
ON CONFLICT DO NOTHING
RETURNING id;

-- name: publish_event_deliveries
-- Run with executemany, one row per matching endpoint.
INSERT INTO tasks (id, queue, status, url, method, headers, body, run_at, priority, key,
                   created_at, updated_at, event_id, endpoint_id, breaker, held_run_at,
                   callback_url, failure_callback_url, traceparent, tracestate)
SELECT :task_id, :endpoint_id, 'ready', :url, 'POST', :headers, :payload,
       CASE WHEN h.open THEN :held_until ELSE :run_at END, 0, :key, :now, :now,
       :event_id, :endpoint_id, :endpoint_id, CASE WHEN h.open THEN :run_at END,
       :callback_url, :failure_callback_url, :traceparent, :tracestate
FROM (SELECT EXISTS (SELECT 1 FROM breakers WHERE key = :endpoint_id AND position = 'open') AS open) h;

-- name: get_event
SELECT * FROM events WHERE id = :id;

-- name: get_event_by_idempotency_key
SELECT * FROM events WHERE coalesce(tenant, '') = coalesce(:tenant, '') AND idempotency_key = :key;

-- name: event_deliveries
SELECT event_id, endpoint_id, id AS task_id, status, attempts FROM tasks
WHERE event_id IN (SELECT value FROM json_each(:ids))
ORDER BY seq;

-- name: list_events
SELECT * FROM events
WHERE seq < :before AND (:type IS NULL OR type = :type) AND (:tenant IS NULL OR tenant = :tenant)
ORDER BY seq DESC LIMIT :limit;

-- name: recover_endpoint
UPDATE tasks
SET status = 'ready', attempt_base = attempts, budget_at = :now, updated_at = :now,
    -- to the endpoint's URL of now: the redrive after fixing it
    url = (SELECT e.url FROM endpoints e WHERE e.id = :id),
    run_at = CASE WHEN h.open THEN :held_until ELSE :now END,
    held_run_at = CASE WHEN h.open THEN :now END
FROM (SELECT EXISTS (SELECT 1 FROM breakers WHERE key = :id AND position = 'open') AS open) h
WHERE queue = :id AND status = 'failed' AND updated_at >= :since
RETURNING seq;

-- name: insert_breakers
INSERT INTO breakers (key) SELECT value FROM json_each(:keys) WHERE true ON CONFLICT (key) DO NOTHING;

-- name: lock_breakers
SELECT * FROM breakers WHERE key IN (SELECT value FROM json_each(:keys)) ORDER BY key;

-- name: save_breaker
UPDATE breakers
SET position = :position, consecutive_failures = :consecutive_failures, failing_since = :failing_since,
    last_success_at = :last_success_at, probe_at = :probe_at, probe_seq = :probe_seq, cooldown = :cooldown
WHERE key = :key;

-- name: reset_breaker
UPDATE breakers
SET position = 'closed', consecutive_failures = 0, failing_since = NULL, probe_at = NULL,
    probe_seq = NULL, cooldown = NULL
WHERE key = :key;

-- name: delete_breaker
DELETE FROM breakers WHERE key = :key;

-- name: hold_endpoint_tasks
UPDATE tasks SET held_run_at = run_at, run_at = :held_until
WHERE queue = :key AND status = 'ready' AND held_run_at IS NULL AND seq IS NOT :probe_seq;

-- name: hold_origin_tasks
UPDATE tasks SET held_run_at = run_at, run_at = :held_until
WHERE seq IN (SELECT t.seq FROM queues q JOIN tasks t INDEXED BY tasks_queue_status
                ON t.queue = q.name AND t.status = 'ready'
              WHERE t.breaker = :key AND t.held_run_at IS NULL AND t.seq IS NOT :probe_seq);

-- name: release_held_tasks
UPDATE tasks SET run_at = held_run_at, held_run_at = NULL
WHERE breaker = :key AND held_run_at IS NOT NULL
RETURNING seq;

-- name: due_probes
-- As in PostgreSQL: open, cooled down, and no probe out (or a lost one).
SELECT key FROM breakers
WHERE position = 'open' AND probe_at <= :now
  AND (probe_seq IS NULL
       OR NOT EXISTS (SELECT 1 FROM tasks t JOIN queues q ON q.name = t.queue
                      WHERE t.seq = breakers.probe_seq
                        AND (t.status = 'running' OR (t.status = 'ready' AND NOT q.paused))))
ORDER BY key;

-- name: release_probe
-- Two steps in SQLite: pick (release_probe, as PostgreSQL's chooses), then free it and
-- record it (release_probe_free, release_probe_set).
SELECT t.seq
FROM tasks t JOIN queues q ON q.name = t.queue
WHERE t.seq IN (SELECT seq FROM tasks INDEXED BY tasks_held
                WHERE breaker = :key AND held_run_at IS NOT NULL AND held_run_at <= :now
                  AND status = 'ready'
                UNION
                SELECT seq FROM tasks
                WHERE queue = :key AND status = 'ready' AND held_run_at IS NULL AND run_at <= :now)
  AND NOT q.paused
  AND (t.key IS NULL OR NOT EXISTS (SELECT 1 FROM tasks h
                                    WHERE h.queue = t.queue AND h.key = t.key
                                      AND h.status IN ('ready', 'running') AND h.seq < t.seq))
ORDER BY coalesce(t.held_run_at, t.run_at), t.seq
LIMIT 1;

-- name: release_probe_free
UPDATE tasks SET run_at = :now, held_run_at = NULL WHERE seq = :seq;

-- name: free_stranded
-- The safety net (see the PostgreSQL query); one writer makes it rarely needed here.
UPDATE tasks SET run_at = held_run_at, held_run_at = NULL
WHERE held_run_at IS NOT NULL AND status = 'ready'
  AND NOT EXISTS (SELECT 1 FROM breakers b WHERE b.key = tasks.breaker AND b.position = 'open')
RETURNING seq;

-- name: release_probe_set
UPDATE breakers SET probe_seq = :seq WHERE key = :key;

-- name: count_endpoints_by_state
-- The health states of workly/webhooks.py's health_state(), counted.
SELECT CASE WHEN NOT e.enabled THEN 'disabled' WHEN b.position = 'open' THEN 'open'
            WHEN b.consecutive_failures > 0 THEN 'failing' ELSE 'healthy' END AS state,
       count(*) AS n
FROM endpoints e LEFT JOIN breakers b ON b.key = e.id
GROUP BY 1;

-- name: endpoint_has_tasks
-- Whether an endpoint has any delivery left (its tenant then stays: they are its tenant's).
SELECT 1 AS found FROM tasks WHERE queue = :id LIMIT 1;

-- name: insert_test_delivery
INSERT INTO tasks (id, queue, status, url, method, headers, body, run_at, held_run_at, priority,
                   created_at, updated_at, endpoint_id, breaker, test)
SELECT :task_id, e.id, 'ready', e.url, 'POST', :headers, :body,
       CASE WHEN b.key IS NULL THEN :now ELSE :held_until END,
       CASE WHEN b.key IS NOT NULL THEN :now END, 0, :now, :now, e.id, e.id, 1
FROM endpoints e LEFT JOIN breakers b ON b.key = e.id AND b.position = 'open'
WHERE e.id = :endpoint_id
RETURNING id;
