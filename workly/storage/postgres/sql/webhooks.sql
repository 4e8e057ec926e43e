-- Workly's webhook platform queries for PostgreSQL: endpoints, events, breakers
-- (docs/webhooks.md). Loaded with core.sql, under the same rules.

-- name: insert_endpoint
-- After put_queue made its queue, in the same transaction.
INSERT INTO endpoints (id, url, description, event_types, tenant, headers, enabled, created_at, updated_at,
                       payload_format, filter, filter_path)
VALUES (:id, :url, :description, :event_types::text[], :tenant, :headers::json, true, :now, :now,
        :payload_format, :filter, :filter_path::jsonpath);

-- name: get_endpoint
-- The endpoint, its health (its breaker) and its delivery settings (its queue's).
SELECT e.*, b.position, b.consecutive_failures, b.failing_since, b.last_success_at, b.probe_at,
       q.max_concurrency, q.rate_limit, q.max_attempts, q.min_backoff, q.max_backoff, q.timeout, q.ordering,
       q.paused, q.signing_secret, q.stop_on, q.deadline, q.retention
FROM endpoints e JOIN queues q ON q.name = e.id LEFT JOIN breakers b ON b.key = e.id
WHERE e.id = :id;

-- name: lock_endpoint
SELECT id FROM endpoints WHERE id = :id FOR NO KEY UPDATE;

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
SET url = :url, description = :description, event_types = :event_types::text[], tenant = :tenant,
    headers = :headers::json, updated_at = :now, payload_format = :payload_format, filter = :filter,
    filter_path = :filter_path::jsonpath
WHERE id = :id;

-- name: update_endpoint_task_urls
-- A new URL applies to the deliveries still waiting, not only to later events.
UPDATE tasks SET url = :url WHERE queue = :id AND status = 'ready' AND url <> :url;

-- name: set_endpoint_enabled
UPDATE endpoints SET enabled = :enabled, disabled_reason = :reason, updated_at = :now WHERE id = :id;

-- name: set_queue_paused
UPDATE queues SET paused = :paused, updated_at = :now WHERE name = :name;

-- name: publish_targets
-- The enabled endpoints of the event's tenant; which of them take the event (types, then
-- filter) is decided by workly/webhooks.py's Routing. (Two queries, so each reads
-- endpoints_tenant.)
SELECT id, url, headers, event_types, filter, payload_format FROM endpoints
WHERE enabled AND tenant = :tenant
ORDER BY seq;

-- name: publish_targets_untenanted
-- An untenanted event's: the untenanted endpoints.
SELECT id, url, headers, event_types, filter, payload_format FROM endpoints
WHERE enabled AND tenant IS NULL
ORDER BY seq;

-- name: publish_event
-- The event and its deliveries in one statement (so one transaction, one round trip):
-- nothing is stored unless the event is, and an event whose idempotency key (or id) is
-- taken stores nothing (the caller then reads the original). A delivery to an endpoint
-- whose breaker is open is held, as enqueue_tasks holds. A tenant named for the first
-- time gets its row (docs/tenants.md). An endpoint with payload_format envelope gets
-- :enveloped, the others the payload.
WITH tenant AS (
    INSERT INTO tenants (tenant, created_at, updated_at)
    SELECT :tenant, :now, :now WHERE :tenant::text IS NOT NULL
    ON CONFLICT (tenant) DO NOTHING
),
event AS (
    INSERT INTO events (id, type, tenant, key, idempotency_key, payload, content_type, run_at, created_at,
                        callback_url, failure_callback_url, labels)
    VALUES (:id, :type, :tenant, :key, :idempotency_key, :payload, :content_type,
            coalesce(:run_at::timestamptz, :now::timestamptz), :now, :callback_url, :failure_callback_url,
            :labels::jsonb)
    ON CONFLICT DO NOTHING
    RETURNING id, run_at
),
inserted AS (
    INSERT INTO tasks (id, queue, status, url, method, headers, body, run_at, priority, key,
                       created_at, updated_at, event_id, endpoint_id, breaker, held_run_at,
                       callback_url, failure_callback_url, traceparent, tracestate)
    SELECT d.task_id, d.endpoint_id, 'ready', d.url, 'POST', d.headers::json,
           CASE WHEN d.envelope THEN :enveloped::bytea ELSE :payload END,
           CASE WHEN b.key IS NULL THEN e.run_at ELSE :held_until::timestamptz END, 0, :key, :now, :now,
           e.id, d.endpoint_id, d.endpoint_id, CASE WHEN b.key IS NOT NULL THEN e.run_at END,
           :callback_url, :failure_callback_url, :traceparent, :tracestate
    FROM event e
    CROSS JOIN unnest(:task_ids::text[], :endpoint_ids::text[], :urls::text[], :headers::text[],
                      :envelopes::boolean[])
         WITH ORDINALITY AS d(task_id, endpoint_id, url, headers, envelope, ord)
    LEFT JOIN breakers b ON b.key = d.endpoint_id AND b.position = 'open'
    ORDER BY d.ord
    RETURNING id
)
SELECT (SELECT count(*) FROM event)::int AS created, (SELECT count(*) FROM inserted)::int AS delivered;

-- name: get_event
SELECT * FROM events WHERE id = :id;

-- name: get_event_by_idempotency_key
SELECT * FROM events WHERE coalesce(tenant, '') = coalesce(:tenant, '') AND idempotency_key = :key;

-- name: event_deliveries
SELECT event_id, endpoint_id, id AS task_id, status, attempts FROM tasks
WHERE event_id = ANY(:ids::text[])
ORDER BY seq;

-- name: list_events
-- :type and :tenant filter when not null.
SELECT * FROM events
WHERE seq < :before AND (:type::text IS NULL OR type = :type) AND (:tenant::text IS NULL OR tenant = :tenant)
ORDER BY seq DESC LIMIT :limit;

-- name: recover_endpoint
-- The endpoint's tasks that failed since :since are ready again, due now, with a fresh
-- attempt budget (as a retry of each). While its breaker is open they are held, as a
-- publish holds: only the probe goes before the breaker closes.
WITH breaker AS (
    SELECT EXISTS (SELECT 1 FROM breakers WHERE key = :id AND position = 'open') AS open
)
UPDATE tasks
SET status = 'ready', attempt_base = attempts, budget_at = :now, updated_at = :now,
    -- to the endpoint's URL of now: the redrive after fixing it
    url = (SELECT e.url FROM endpoints e WHERE e.id = :id),
    run_at = CASE WHEN (SELECT open FROM breaker) THEN :held_until::timestamptz ELSE :now::timestamptz END,
    held_run_at = CASE WHEN (SELECT open FROM breaker) THEN :now::timestamptz END
WHERE queue = :id AND status = 'failed' AND updated_at >= :since
RETURNING seq;

-- name: insert_breakers
INSERT INTO breakers (key) SELECT unnest(:keys::text[]) ON CONFLICT (key) DO NOTHING;

-- name: lock_breakers
-- In key order, so two processes recording failures of the same receivers cannot deadlock.
SELECT * FROM breakers WHERE key = ANY(:keys::text[]) ORDER BY key FOR UPDATE;

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
-- The endpoint's ready tasks (its queue's) wait for the breaker: far in the future, with
-- the time they were due kept in held_run_at.
UPDATE tasks SET held_run_at = run_at, run_at = :held_until
WHERE queue = :key AND status = 'ready' AND held_run_at IS NULL AND seq IS DISTINCT FROM :probe_seq::bigint;

-- name: hold_origin_tasks
-- A plain origin's ready tasks, in whatever queue: read queue by queue from
-- tasks_queue_status. Runs when a breaker opens, not per claim.
UPDATE tasks t SET held_run_at = t.run_at, run_at = :held_until
FROM queues q
WHERE t.queue = q.name AND t.status = 'ready' AND t.breaker = :key AND t.held_run_at IS NULL
  AND t.seq IS DISTINCT FROM :probe_seq::bigint;

-- name: release_held_tasks
UPDATE tasks SET run_at = held_run_at, held_run_at = NULL
WHERE breaker = :key AND held_run_at IS NOT NULL
RETURNING seq;

-- name: due_probes
-- Open breakers whose cool-down is over and that have no probe out: none released yet, or
-- it was canceled, deleted or failed for good, or it waits in a paused queue. SKIP LOCKED:
-- one process releases each probe.
SELECT key FROM breakers
WHERE position = 'open' AND probe_at <= :now
  AND (probe_seq IS NULL
       OR NOT EXISTS (SELECT 1 FROM tasks t JOIN queues q ON q.name = t.queue
                      WHERE t.seq = breakers.probe_seq
                        AND (t.status = 'running' OR (t.status = 'ready' AND NOT q.paused))))
ORDER BY key
FOR UPDATE SKIP LOCKED;

-- name: release_probe
-- The breaker's task due first becomes the probe, due now: one the claim can take (in an
-- unpaused queue, the head of its key) among the held ones, and, for an endpoint, any of
-- its queue's ready ones that a hold missed. Only one: the breaker records it, and no other
-- is released until its result.
WITH candidates AS (
    SELECT seq FROM tasks
    WHERE breaker = :key AND held_run_at IS NOT NULL AND held_run_at <= :now AND status = 'ready'
    UNION
    SELECT seq FROM tasks
    WHERE queue = :key AND status = 'ready' AND held_run_at IS NULL AND run_at <= :now
),
probe AS (
    SELECT t.seq
    FROM candidates c JOIN tasks t ON t.seq = c.seq JOIN queues q ON q.name = t.queue
    WHERE NOT q.paused
      AND (t.key IS NULL OR NOT EXISTS (SELECT 1 FROM tasks h
                                        WHERE h.queue = t.queue AND h.key = t.key
                                          AND h.status IN ('ready', 'running') AND h.seq < t.seq))
    ORDER BY coalesce(t.held_run_at, t.run_at), t.seq
    LIMIT 1
    FOR UPDATE OF t SKIP LOCKED
),
freed AS (
    UPDATE tasks t SET run_at = :now, held_run_at = NULL FROM probe p WHERE t.seq = p.seq RETURNING t.seq
)
UPDATE breakers SET probe_seq = (SELECT seq FROM freed)
WHERE key = :key AND EXISTS (SELECT 1 FROM freed)
RETURNING probe_seq;

-- name: free_stranded
-- The safety net: held tasks whose breaker is not open (it closed while they were being
-- held, or the process that was to free them stopped) go back to when they were due.
-- Reads only held tasks (tasks_held).
UPDATE tasks t SET run_at = t.held_run_at, held_run_at = NULL
WHERE t.held_run_at IS NOT NULL AND t.status = 'ready'
  AND NOT EXISTS (SELECT 1 FROM breakers b WHERE b.key = t.breaker AND b.position = 'open')
RETURNING t.seq;

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
-- POST /v1/endpoints/{id}/test: one delivery to the endpoint of no event, marked test, held
-- while its breaker is open as any of its deliveries.
INSERT INTO tasks (id, queue, status, url, method, headers, body, run_at, held_run_at, priority,
                   created_at, updated_at, endpoint_id, breaker, test)
SELECT :task_id, e.id, 'ready', e.url, 'POST', :headers::json, :body,
       CASE WHEN b.key IS NULL THEN :now::timestamptz ELSE :held_until::timestamptz END,
       CASE WHEN b.key IS NOT NULL THEN :now::timestamptz END, 0, :now, :now, e.id, e.id, true
FROM endpoints e LEFT JOIN breakers b ON b.key = e.id AND b.position = 'open'
WHERE e.id = :endpoint_id
RETURNING id;
