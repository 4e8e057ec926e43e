-- Workly's data lifecycle queries for PostgreSQL (docs/retention.md): retention, deletes,
-- a tenant's erasure and export. Loaded with core.sql, under the same rules.
--
-- Retention deletes in small batches (:limit), oldest first, so no transaction holds locks
-- for long; attempts go with their task (ON DELETE CASCADE). A task's retention is its
-- queue's or its tenant's when either has one (the shorter when both do: each has its own
-- pass below), else WORKLY_RETENTION (succeeded) or WORKLY_FAILED_RETENTION (failed and
-- canceled). A task's tenant is its own (plain tasks) or its event's (deliveries).

-- name: prune_succeeded
-- Succeeded tasks finished before :cutoff whose queue and tenant keep no retention of
-- their own (tasks_succeeded: each batch reads what it deletes, and those it skips).
WITH doomed AS (
    SELECT t.seq FROM tasks t
    WHERE t.status = 'succeeded' AND t.updated_at < :cutoff
      AND NOT EXISTS (SELECT 1 FROM queues q WHERE q.name = t.queue AND q.retention IS NOT NULL)
      AND NOT EXISTS (SELECT 1 FROM tenants n
                      WHERE n.retention IS NOT NULL
                        AND n.tenant = coalesce(t.tenant, (SELECT e.tenant FROM events e WHERE e.id = t.event_id)))
    ORDER BY t.updated_at
    LIMIT :limit
    FOR UPDATE OF t SKIP LOCKED
)
DELETE FROM tasks t USING doomed d WHERE t.seq = d.seq
RETURNING t.seq;

-- name: prune_failed
-- Failed and canceled tasks, as prune_succeeded (tasks_failed).
WITH doomed AS (
    SELECT t.seq FROM tasks t
    WHERE t.status IN ('failed', 'canceled') AND t.updated_at < :cutoff
      AND NOT EXISTS (SELECT 1 FROM queues q WHERE q.name = t.queue AND q.retention IS NOT NULL)
      AND NOT EXISTS (SELECT 1 FROM tenants n
                      WHERE n.retention IS NOT NULL
                        AND n.tenant = coalesce(t.tenant, (SELECT e.tenant FROM events e WHERE e.id = t.event_id)))
    ORDER BY t.updated_at
    LIMIT :limit
    FOR UPDATE OF t SKIP LOCKED
)
DELETE FROM tasks t USING doomed d WHERE t.seq = d.seq
RETURNING t.seq;

-- name: retention_overrides
-- The queues and tenants that keep their own retention (0: forever, nothing to prune).
SELECT 'queue' AS kind, name, retention FROM queues WHERE retention > 0
UNION ALL
SELECT 'tenant' AS kind, tenant AS name, retention FROM tenants WHERE retention > 0;

-- name: prune_queue
-- The finished tasks of queue :queue finished before :cutoff. Only tasks created before
-- the cutoff can be that old: the scan of tasks_queue_seq stops at the first created since.
WITH bound AS (
    SELECT coalesce((SELECT seq FROM tasks WHERE queue = :queue AND created_at >= :cutoff
                     ORDER BY seq LIMIT 1), 9223372036854775807) AS seq
),
doomed AS (
    SELECT seq FROM tasks
    WHERE queue = :queue AND seq < (SELECT seq FROM bound)
      AND status IN ('succeeded', 'failed', 'canceled') AND updated_at < :cutoff
    ORDER BY seq
    LIMIT :limit
    FOR UPDATE SKIP LOCKED
)
DELETE FROM tasks t USING doomed d WHERE t.seq = d.seq
RETURNING t.seq;

-- name: prune_tenant_tasks
-- Tenant :tenant's finished plain tasks finished before :cutoff (tasks_tenant, bounded as
-- prune_queue is).
WITH bound AS (
    SELECT coalesce((SELECT seq FROM tasks WHERE tenant = :tenant AND created_at >= :cutoff
                     ORDER BY seq LIMIT 1), 9223372036854775807) AS seq
),
doomed AS (
    SELECT seq FROM tasks
    WHERE tenant = :tenant AND seq < (SELECT seq FROM bound)
      AND status IN ('succeeded', 'failed', 'canceled') AND updated_at < :cutoff
    ORDER BY seq
    LIMIT :limit
    FOR UPDATE SKIP LOCKED
)
DELETE FROM tasks t USING doomed d WHERE t.seq = d.seq
RETURNING t.seq;

-- name: prune_tenant_deliveries
-- The finished deliveries of tenant :tenant's events, finished before :cutoff: through its
-- events published before the cutoff (events_tenant, then tasks_event).
WITH bound AS (
    SELECT coalesce((SELECT seq FROM events WHERE tenant = :tenant AND created_at >= :cutoff
                     ORDER BY seq LIMIT 1), 9223372036854775807) AS seq
),
doomed AS (
    SELECT t.seq FROM events e JOIN tasks t ON t.event_id = e.id
    WHERE e.tenant = :tenant AND e.seq < (SELECT seq FROM bound)
      AND t.status IN ('succeeded', 'failed', 'canceled') AND t.updated_at < :cutoff
    ORDER BY e.seq
    LIMIT :limit
    FOR UPDATE OF t SKIP LOCKED
)
DELETE FROM tasks t USING doomed d WHERE t.seq = d.seq
RETURNING t.seq;

-- name: prune_tenant_events
-- Tenant :tenant's events published before :cutoff none of whose deliveries is left (the
-- scan of events_tenant stops at the first published since, as prune_queue's does).
WITH bound AS (
    SELECT coalesce((SELECT seq FROM events WHERE tenant = :tenant AND created_at >= :cutoff
                     ORDER BY seq LIMIT 1), 9223372036854775807) AS seq
),
doomed AS (
    SELECT e.seq FROM events e
    WHERE e.tenant = :tenant AND e.seq < (SELECT seq FROM bound) AND e.created_at < :cutoff
      AND NOT EXISTS (SELECT 1 FROM tasks t WHERE t.event_id = e.id)
    ORDER BY e.seq
    LIMIT :limit
    FOR UPDATE SKIP LOCKED
)
DELETE FROM events e USING doomed d WHERE e.seq = d.seq
RETURNING e.seq;

-- name: prune_events
-- Events published before :cutoff (WORKLY_RETENTION) none of whose deliveries is left, of
-- tenants without a retention of their own: an event goes with its last delivery.
WITH doomed AS (
    SELECT e.seq FROM events e
    WHERE e.created_at < :cutoff AND NOT EXISTS (SELECT 1 FROM tasks t WHERE t.event_id = e.id)
      AND NOT EXISTS (SELECT 1 FROM tenants n WHERE n.tenant = e.tenant AND n.retention IS NOT NULL)
    ORDER BY e.seq
    LIMIT :limit
    FOR UPDATE SKIP LOCKED
)
DELETE FROM events e USING doomed d WHERE e.seq = d.seq
RETURNING e.seq;

-- name: prune_retired_queues
-- The queues of deleted endpoints none of whose deliveries is left.
DELETE FROM queues q
WHERE q.retired AND NOT EXISTS (SELECT 1 FROM tasks t WHERE t.queue = q.name)
RETURNING q.name;

-- name: retire_endpoint_queue
-- Deleting an endpoint: its queue stays, paused and retired, while its finished deliveries
-- do (they stay visible on their events until retention); its signing secrets go now.
UPDATE queues SET retired = true, paused = true, signing_secret = NULL, updated_at = :now WHERE name = :id;

-- name: delete_pending_deliveries
-- … and its deliveries not yet finished go (a running one's result then finds no row), and
-- its test deliveries (of no event: nothing would show them, or find them for an erasure).
DELETE FROM tasks WHERE queue = :id AND (status IN ('ready', 'running') OR test);

-- name: delete_endpoint_row
DELETE FROM endpoints WHERE id = :id;

-- name: delete_queue_if_empty
DELETE FROM queues WHERE name = :name AND NOT EXISTS (SELECT 1 FROM tasks WHERE queue = :name);

-- name: delete_task
-- DELETE /v1/tasks/{id}: the task with its attempts, and the callbacks made of it (they copy
-- its body); never while it runs (its lock is waited for: a claim committing meanwhile
-- makes it running, and the row is then left alone).
WITH doomed AS (
    SELECT seq, id FROM tasks WHERE id = :id AND status <> 'running' FOR UPDATE
),
callbacks AS (
    DELETE FROM tasks c WHERE c.callback_of IN (SELECT id FROM doomed) RETURNING c.seq
)
DELETE FROM tasks t USING doomed d WHERE t.seq = d.seq
RETURNING t.seq;

-- name: lock_event
SELECT id FROM events WHERE id = :id FOR UPDATE;

-- name: lock_event_deliveries
-- Locked, so no claim takes one of them while the event is being deleted.
SELECT id, status FROM tasks WHERE event_id = :id FOR UPDATE;

-- name: delete_event_deliveries
-- DELETE /v1/events/{id}: its deliveries with their attempts and callbacks, then the event.
WITH deliveries AS (
    DELETE FROM tasks WHERE event_id = :id RETURNING id
),
callbacks AS (
    DELETE FROM tasks c WHERE c.callback_of IN (SELECT id FROM deliveries) RETURNING c.seq
)
SELECT count(*)::int AS deleted FROM deliveries;

-- name: delete_event
DELETE FROM events WHERE id = :id;

-- A tenant's erasure (DELETE /v1/tenants/{tenant}): an operation (action 'erase') worked
-- through in phases (operations.phase; storage/postgres/erasure.py), each chunk one short
-- transaction that deletes at most :chunk tasks or events, so enqueues and claims never
-- wait long on it.

-- name: lock_erase
-- One erase of a tenant at a time: creating one waits for another being created.
SELECT pg_advisory_xact_lock(hashtext('workly erase ' || :tenant)) AS locked;

-- name: tenant_known
-- Whether anything names the tenant: its row, or what may name it without one (a plain
-- task, a key made before its first endpoint, a schedule's template).
SELECT EXISTS (SELECT 1 FROM tenants WHERE tenant = :tenant)
       OR EXISTS (SELECT 1 FROM tasks WHERE tenant = :tenant)
       OR EXISTS (SELECT 1 FROM api_keys WHERE tenant = :tenant)
       OR EXISTS (SELECT 1 FROM schedules
                  WHERE (template #>> '{}')::jsonb #>> '{task,tenant}' = :tenant
                     OR (template #>> '{}')::jsonb #>> '{event,tenant}' = :tenant) AS known;

-- name: running_erase
SELECT * FROM operations
WHERE state = 'running' AND action = 'erase' AND ((filter #>> '{}')::jsonb ->> 'tenant') = :tenant
LIMIT 1;

-- name: insert_erase_operation
-- matched: its events, its plain tasks and its endpoints' deliveries, counted now.
INSERT INTO operations (id, action, filter, upto_seq, matched, phase, created_at, updated_at)
VALUES (:id, 'erase', :filter::json, 0,
        (SELECT count(*) FROM events WHERE tenant = :tenant)
        + (SELECT count(*) FROM tasks WHERE tenant = :tenant)
        + (SELECT count(*) FROM endpoints e JOIN tasks t ON t.queue = e.id WHERE e.tenant = :tenant),
        'access', :now, :now)
RETURNING *;

-- name: erase_keys
-- Its keys, and the dashboard sessions they opened.
WITH keys AS (DELETE FROM api_keys WHERE tenant = :tenant RETURNING id),
sessions AS (DELETE FROM sessions WHERE key_id IN (SELECT id FROM keys) RETURNING 1)
SELECT count(*)::int AS deleted FROM keys;

-- name: erase_turns
-- Its fairness state.
DELETE FROM queue_turns WHERE tenant = :tenant;

-- name: erase_schedules
-- The schedules whose template makes its tasks or events.
DELETE FROM schedules
WHERE (template #>> '{}')::jsonb #>> '{task,tenant}' = :tenant
   OR (template #>> '{}')::jsonb #>> '{event,tenant}' = :tenant
RETURNING seq;

-- name: operations_naming_tenant
-- Other operations whose filter names it (their filter is redacted to its hash).
SELECT id, filter FROM operations
WHERE id <> :id AND ((filter #>> '{}')::jsonb ->> 'tenant') = :tenant;

-- name: redact_operation
UPDATE operations SET filter = :filter::json WHERE id = :id;

-- name: erase_hold_endpoints
-- Its endpoints take no more events and deliver nothing more while their deliveries go.
WITH held AS (
    UPDATE endpoints SET enabled = false, updated_at = :now WHERE tenant = :tenant RETURNING id
)
UPDATE queues SET paused = true, updated_at = :now WHERE name IN (SELECT id FROM held);

-- name: erase_next_endpoint
SELECT id FROM endpoints WHERE tenant = :tenant ORDER BY seq LIMIT 1;

-- name: erase_queue_tasks
-- The next :chunk tasks of an endpoint's queue, whatever their status (a running one's
-- result then finds no row), with the callbacks made of them.
WITH doomed AS (
    SELECT seq, id FROM tasks WHERE queue = :queue ORDER BY seq LIMIT :chunk FOR UPDATE
),
callbacks AS (
    DELETE FROM tasks c WHERE c.callback_of IN (SELECT id FROM doomed) RETURNING c.seq
),
gone AS (
    DELETE FROM tasks t USING doomed d WHERE t.seq = d.seq RETURNING t.seq
)
SELECT count(*)::int AS deleted FROM gone;

-- name: erase_minutes
-- The delivery counts kept for an endpoint of it.
DELETE FROM delivery_minutes WHERE name = :name;

-- name: erase_events
-- Its next :chunk events, with the deliveries left of them (to endpoints deleted before)
-- and their callbacks.
WITH doomed AS (
    SELECT seq, id FROM events WHERE tenant = :tenant ORDER BY seq LIMIT :chunk FOR UPDATE
),
deliveries AS (
    DELETE FROM tasks t WHERE t.event_id IN (SELECT id FROM doomed) RETURNING t.id
),
callbacks AS (
    DELETE FROM tasks c WHERE c.callback_of IN (SELECT id FROM deliveries) RETURNING c.seq
),
gone AS (
    DELETE FROM events e USING doomed d WHERE e.seq = d.seq RETURNING e.seq
)
SELECT (SELECT count(*) FROM gone)::int AS events, (SELECT count(*) FROM deliveries)::int AS deliveries;

-- name: erase_tenant_tasks
-- Its next :chunk plain tasks (tasks_tenant), with their callbacks.
WITH doomed AS (
    SELECT seq, id FROM tasks WHERE tenant = :tenant ORDER BY seq LIMIT :chunk FOR UPDATE
),
callbacks AS (
    DELETE FROM tasks c WHERE c.callback_of IN (SELECT id FROM doomed) RETURNING c.seq
),
gone AS (
    DELETE FROM tasks t USING doomed d WHERE t.seq = d.seq RETURNING t.seq
)
SELECT count(*)::int AS deleted FROM gone;

-- name: erase_notices
-- Workly's own events about its endpoints (workly.endpoint.*, whose data names it), the
-- next :chunk of them after :after_seq, with their deliveries and callbacks.
WITH scanned AS (
    SELECT seq, id, payload FROM events
    WHERE type IN ('workly.endpoint.disabled', 'workly.endpoint.enabled', 'workly.task.failed') AND seq > :after_seq
    ORDER BY seq LIMIT :chunk
),
doomed AS (
    SELECT seq, id FROM scanned WHERE convert_from(payload, 'UTF8')::jsonb #>> '{data,tenant}' = :tenant
),
deliveries AS (
    DELETE FROM tasks t WHERE t.event_id IN (SELECT id FROM doomed) RETURNING t.id
),
callbacks AS (
    DELETE FROM tasks c WHERE c.callback_of IN (SELECT id FROM deliveries) RETURNING c.seq
),
gone AS (
    DELETE FROM events e USING doomed d WHERE e.seq = d.seq RETURNING e.seq
)
SELECT (SELECT count(*) FROM scanned)::int AS scanned, (SELECT max(seq) FROM scanned) AS last_seq,
       (SELECT count(*) FROM gone)::int AS events, (SELECT count(*) FROM deliveries)::int AS deliveries;

-- name: erase_tenant_row
DELETE FROM tenants WHERE tenant = :tenant;

-- name: advance_erase
UPDATE operations
SET phase = :phase, after_seq = :after_seq, changed = changed + :changed,
    lease_expires_at = :lease_until, updated_at = :now
WHERE id = :id
RETURNING *;

-- name: finish_erase
-- Done: the operation names the tenant only by its hash from now on.
UPDATE operations
SET state = 'succeeded', phase = NULL, filter = :filter::json, changed = changed + :changed,
    matched = greatest(matched, changed + :changed), finished_at = :now, updated_at = :now
WHERE id = :id
RETURNING *;

-- A tenant's export (GET /v1/tenants/{tenant}/export): pages in seq order, each read with the
-- attempts of its tasks (storage/<dialect>/export.py).

-- name: export_event_tasks
-- The deliveries of a page of its events.
SELECT * FROM task_view
WHERE event_id = ANY(:ids::text[]) AND seq > :after_seq
ORDER BY seq LIMIT :limit;

-- name: export_tenant_tasks
-- A page of its plain tasks (tasks_tenant).
SELECT * FROM task_view WHERE tenant = :tenant AND seq > :after_seq ORDER BY seq LIMIT :limit;

-- name: export_test_tasks
-- A page of an endpoint's test deliveries (of no event).
SELECT * FROM task_view
WHERE queue = :queue AND event_id IS NULL AND seq > :after_seq
ORDER BY seq LIMIT :limit;

-- name: export_attempts
SELECT a.task_seq, t.id AS task_id, a.attempt, a.started_at, a.finished_at, a.status_code, a.error,
       a.response, a.stale
FROM attempts a JOIN tasks t ON t.seq = a.task_seq
WHERE a.task_seq = ANY(:seqs::bigint[])
ORDER BY a.task_seq, a.id;
