-- Workly's data lifecycle queries for SQLite (see postgres/sql/lifecycle.sql): retention,
-- deletes, a tenant's erasure and export. One writer: no row locks to skip.

-- name: prune_succeeded
DELETE FROM tasks
WHERE seq IN (
    SELECT t.seq FROM tasks t INDEXED BY tasks_succeeded
    WHERE t.status = 'succeeded' AND t.updated_at < :cutoff
      AND NOT EXISTS (SELECT 1 FROM queues q WHERE q.name = t.queue AND q.retention IS NOT NULL)
      AND NOT EXISTS (SELECT 1 FROM tenants n
                      WHERE n.retention IS NOT NULL
                        AND n.tenant = coalesce(t.tenant, (SELECT e.tenant FROM events e WHERE e.id = t.event_id)))
    ORDER BY t.updated_at
    LIMIT :limit
)
RETURNING seq;

-- name: prune_failed
DELETE FROM tasks
WHERE seq IN (
    SELECT t.seq FROM tasks t INDEXED BY tasks_failed
    WHERE t.status IN ('failed', 'canceled') AND t.updated_at < :cutoff
      AND NOT EXISTS (SELECT 1 FROM queues q WHERE q.name = t.queue AND q.retention IS NOT NULL)
      AND NOT EXISTS (SELECT 1 FROM tenants n
                      WHERE n.retention IS NOT NULL
                        AND n.tenant = coalesce(t.tenant, (SELECT e.tenant FROM events e WHERE e.id = t.event_id)))
    ORDER BY t.updated_at
    LIMIT :limit
)
RETURNING seq;

-- name: retention_overrides
SELECT 'queue' AS kind, name, retention FROM queues WHERE retention > 0
UNION ALL
SELECT 'tenant' AS kind, tenant AS name, retention FROM tenants WHERE retention > 0;

-- name: prune_queue
DELETE FROM tasks
WHERE seq IN (
    SELECT seq FROM tasks INDEXED BY tasks_queue_seq
    WHERE queue = :queue
      AND seq < coalesce((SELECT seq FROM tasks INDEXED BY tasks_queue_seq
                          WHERE queue = :queue AND created_at >= :cutoff ORDER BY seq LIMIT 1),
                         9223372036854775807)
      AND status IN ('succeeded', 'failed', 'canceled') AND updated_at < :cutoff
    ORDER BY seq
    LIMIT :limit
)
RETURNING seq;

-- name: prune_tenant_tasks
DELETE FROM tasks
WHERE seq IN (
    SELECT seq FROM tasks INDEXED BY tasks_tenant
    WHERE tenant = :tenant
      AND seq < coalesce((SELECT seq FROM tasks INDEXED BY tasks_tenant
                          WHERE tenant = :tenant AND created_at >= :cutoff ORDER BY seq LIMIT 1),
                         9223372036854775807)
      AND status IN ('succeeded', 'failed', 'canceled') AND updated_at < :cutoff
    ORDER BY seq
    LIMIT :limit
)
RETURNING seq;

-- name: prune_tenant_deliveries
DELETE FROM tasks
WHERE seq IN (
    SELECT t.seq FROM events e INDEXED BY events_tenant JOIN tasks t ON t.event_id = e.id
    WHERE e.tenant = :tenant
      AND e.seq < coalesce((SELECT seq FROM events INDEXED BY events_tenant
                            WHERE tenant = :tenant AND created_at >= :cutoff ORDER BY seq LIMIT 1),
                           9223372036854775807)
      AND t.status IN ('succeeded', 'failed', 'canceled') AND t.updated_at < :cutoff
    ORDER BY e.seq
    LIMIT :limit
)
RETURNING seq;

-- name: prune_tenant_events
DELETE FROM events
WHERE seq IN (
    SELECT e.seq FROM events e INDEXED BY events_tenant
    WHERE e.tenant = :tenant AND e.created_at < :cutoff
      AND e.seq < coalesce((SELECT seq FROM events INDEXED BY events_tenant
                            WHERE tenant = :tenant AND created_at >= :cutoff ORDER BY seq LIMIT 1),
                           9223372036854775807)
      AND NOT EXISTS (SELECT 1 FROM tasks t WHERE t.event_id = e.id)
    ORDER BY e.seq
    LIMIT :limit
)
RETURNING seq;

-- name: prune_events
DELETE FROM events
WHERE seq IN (SELECT e.seq FROM events e
              WHERE e.created_at < :cutoff
                AND NOT EXISTS (SELECT 1 FROM tasks t WHERE t.event_id = e.id)
                AND NOT EXISTS (SELECT 1 FROM tenants n WHERE n.tenant = e.tenant AND n.retention IS NOT NULL)
              ORDER BY e.seq
              LIMIT :limit)
RETURNING seq;

-- name: prune_retired_queues
DELETE FROM queues
WHERE retired AND NOT EXISTS (SELECT 1 FROM tasks t WHERE t.queue = queues.name)
RETURNING name;

-- name: retire_endpoint_queue
UPDATE queues SET retired = 1, paused = 1, signing_secret = NULL, updated_at = :now WHERE name = :id;

-- name: delete_pending_deliveries
DELETE FROM tasks WHERE queue = :id AND (status IN ('ready', 'running') OR test);

-- name: delete_endpoint_row
DELETE FROM endpoints WHERE id = :id;

-- name: delete_queue_if_empty
DELETE FROM queues WHERE name = :name AND NOT EXISTS (SELECT 1 FROM tasks WHERE queue = :name);

-- name: delete_task_callbacks
-- delete_task, in two statements (one writer: nothing runs between them).
DELETE FROM tasks WHERE callback_of = :id;

-- name: delete_task
DELETE FROM tasks WHERE id = :id AND status <> 'running' RETURNING seq;

-- name: lock_event
SELECT id FROM events WHERE id = :id;

-- name: lock_event_deliveries
SELECT id, status FROM tasks WHERE event_id = :id;

-- name: delete_event_deliveries_callbacks
DELETE FROM tasks WHERE callback_of IN (SELECT id FROM tasks WHERE event_id = :id);

-- name: delete_event_deliveries
DELETE FROM tasks WHERE event_id = :id RETURNING seq;

-- name: delete_event
DELETE FROM events WHERE id = :id;

-- A tenant's erasure (see the PostgreSQL file). SQLite runs each chunk's deletes as
-- several statements on the writer (storage/sqlite/erasure.py).

-- name: tenant_known
SELECT EXISTS (SELECT 1 FROM tenants WHERE tenant = :tenant)
       OR EXISTS (SELECT 1 FROM tasks INDEXED BY tasks_tenant WHERE tenant = :tenant)
       OR EXISTS (SELECT 1 FROM api_keys WHERE tenant = :tenant)
       OR EXISTS (SELECT 1 FROM schedules
                  WHERE json_extract(template, '$.task.tenant') = :tenant
                     OR json_extract(template, '$.event.tenant') = :tenant) AS known;

-- name: running_erase
SELECT * FROM operations
WHERE state = 'running' AND action = 'erase' AND json_extract(filter, '$.tenant') = :tenant
LIMIT 1;

-- name: insert_erase_operation_count
-- insert_erase_operation's count, on the reader first (the writer does not wait on it).
SELECT (SELECT count(*) FROM events INDEXED BY events_tenant WHERE tenant = :tenant)
       + (SELECT count(*) FROM tasks INDEXED BY tasks_tenant WHERE tenant = :tenant)
       + (SELECT count(*) FROM endpoints e JOIN tasks t ON t.queue = e.id WHERE e.tenant = :tenant) AS matched;

-- name: insert_erase_operation
INSERT INTO operations (id, action, filter, upto_seq, matched, phase, created_at, updated_at)
VALUES (:id, 'erase', :filter, 0, :matched, 'access', :now, :now)
RETURNING *;

-- name: erase_keys_sessions
-- erase_keys, in two statements.
DELETE FROM sessions WHERE key_id IN (SELECT id FROM api_keys WHERE tenant = :tenant);

-- name: erase_keys
DELETE FROM api_keys WHERE tenant = :tenant RETURNING id;

-- name: erase_turns
DELETE FROM queue_turns WHERE tenant = :tenant;

-- name: erase_schedules
DELETE FROM schedules
WHERE json_extract(template, '$.task.tenant') = :tenant OR json_extract(template, '$.event.tenant') = :tenant
RETURNING seq;

-- name: operations_naming_tenant
SELECT id, filter FROM operations WHERE id <> :id AND json_extract(filter, '$.tenant') = :tenant;

-- name: redact_operation
UPDATE operations SET filter = :filter WHERE id = :id;

-- name: erase_hold_endpoints_queues
-- erase_hold_endpoints, in two statements.
UPDATE queues SET paused = 1, updated_at = :now WHERE name IN (SELECT id FROM endpoints WHERE tenant = :tenant);

-- name: erase_hold_endpoints
UPDATE endpoints SET enabled = 0, updated_at = :now WHERE tenant = :tenant;

-- name: erase_next_endpoint
SELECT id FROM endpoints WHERE tenant = :tenant ORDER BY seq LIMIT 1;

-- name: erase_queue_tasks_ids
-- erase_queue_tasks: the ids first (their callbacks go by them), then the rows.
SELECT seq, id FROM tasks INDEXED BY tasks_queue_seq WHERE queue = :queue ORDER BY seq LIMIT :chunk;

-- name: erase_queue_tasks
DELETE FROM tasks WHERE seq IN (SELECT value FROM json_each(:seqs)) RETURNING seq;

-- name: erase_events_callbacks
-- The callbacks made of the tasks named (a JSON array of ids): every phase's.
DELETE FROM tasks WHERE callback_of IN (SELECT value FROM json_each(:ids));

-- name: erase_minutes
DELETE FROM delivery_minutes WHERE name = :name;

-- name: erase_events_ids
SELECT seq, id FROM events INDEXED BY events_tenant WHERE tenant = :tenant ORDER BY seq LIMIT :chunk;

-- name: erase_events_deliveries
SELECT seq, id FROM tasks WHERE event_id IN (SELECT value FROM json_each(:ids));

-- name: erase_events_delete_deliveries
-- Tasks by seq (a JSON array): the deliveries of the events (and notices) erased.
DELETE FROM tasks WHERE seq IN (SELECT value FROM json_each(:seqs)) RETURNING seq;

-- name: erase_events
DELETE FROM events WHERE seq IN (SELECT value FROM json_each(:seqs)) RETURNING seq;

-- name: erase_tenant_tasks_ids
SELECT seq, id FROM tasks INDEXED BY tasks_tenant WHERE tenant = :tenant ORDER BY seq LIMIT :chunk;

-- name: erase_tenant_tasks
DELETE FROM tasks WHERE seq IN (SELECT value FROM json_each(:seqs)) RETURNING seq;

-- name: erase_notices_scanned
SELECT seq, id, json_extract(CAST(payload AS TEXT), '$.data.tenant') AS tenant FROM events
WHERE type IN ('workly.endpoint.disabled', 'workly.endpoint.enabled', 'workly.task.failed') AND seq > :after_seq
ORDER BY seq LIMIT :chunk;

-- name: erase_notices
DELETE FROM events WHERE seq IN (SELECT value FROM json_each(:seqs)) RETURNING seq;

-- name: erase_tenant_row
DELETE FROM tenants WHERE tenant = :tenant;

-- name: advance_erase
UPDATE operations
SET phase = :phase, after_seq = :after_seq, changed = changed + :changed,
    lease_expires_at = :lease_until, updated_at = :now
WHERE id = :id
RETURNING *;

-- name: finish_erase
UPDATE operations
SET state = 'succeeded', phase = NULL, filter = :filter, changed = changed + :changed,
    matched = max(matched, changed + :changed), finished_at = :now, updated_at = :now
WHERE id = :id
RETURNING *;

-- A tenant's export (see the PostgreSQL file).

-- name: export_event_tasks
SELECT * FROM task_view
WHERE event_id IN (SELECT value FROM json_each(:ids)) AND seq > :after_seq
ORDER BY seq LIMIT :limit;

-- name: export_tenant_tasks
SELECT * FROM task_view WHERE tenant = :tenant AND seq > :after_seq ORDER BY seq LIMIT :limit;

-- name: export_test_tasks
SELECT * FROM task_view
WHERE queue = :queue AND event_id IS NULL AND seq > :after_seq
ORDER BY seq LIMIT :limit;

-- name: export_attempts
SELECT a.task_seq, t.id AS task_id, a.attempt, a.started_at, a.finished_at, a.status_code, a.error,
       a.response, a.stale
FROM attempts a JOIN tasks t ON t.seq = a.task_seq
WHERE a.task_seq IN (SELECT value FROM json_each(:seqs))
ORDER BY a.task_seq, a.id;
