-- Schedules for PostgreSQL (workly/schedules.py, storage/postgres/schedules.py).

-- name: insert_schedule
INSERT INTO schedules (id, name, cron, timezone, template, paused, catch_up, next_run_at,
                       created_at, updated_at)
VALUES (:id, :name, :cron, :timezone, :template::json, :paused, :catch_up, :next_run_at, :now, :now)
RETURNING *;

-- name: get_schedule
SELECT * FROM schedules WHERE id = :id;

-- name: list_schedules
SELECT * FROM schedules WHERE seq < :before ORDER BY seq DESC LIMIT :limit;

-- name: lock_schedule
-- A change or a trigger waits for a firing of the same schedule in flight, and the other
-- way round: the two never interleave.
SELECT * FROM schedules WHERE id = :id FOR UPDATE;

-- name: lock_due_schedules
-- The schedules due now, the most overdue first. SKIP LOCKED: a schedule another process is
-- firing is left to it (that process moves it on before anyone sees it again).
-- :skip names schedules this process cannot plan now (scheduler.py): they stay due for the
-- others.
SELECT * FROM schedules
WHERE next_run_at <= :now AND NOT (id = ANY(:skip::text[]))
ORDER BY next_run_at
LIMIT :limit
FOR UPDATE SKIP LOCKED;

-- name: update_schedule
UPDATE schedules
SET name = :name, cron = :cron, timezone = :timezone, template = :template::json, paused = :paused,
    catch_up = :catch_up, next_run_at = :next_run_at, updated_at = :now
WHERE id = :id;

-- name: advance_schedules
-- After a batch of firings, in one statement: where each schedule goes next and, when its
-- firing made something, what.
UPDATE schedules s
SET next_run_at = a.next_run_at,
    last_run_at = coalesce(a.fire_at, s.last_run_at),
    last_task_id = CASE WHEN a.fire_at IS NULL THEN s.last_task_id ELSE a.task_id END,
    last_event_id = CASE WHEN a.fire_at IS NULL THEN s.last_event_id ELSE a.event_id END
FROM unnest(:ids::text[], :next_run_ats::timestamptz[], :fire_ats::timestamptz[], :task_ids::text[],
            :event_ids::text[]) AS a(id, next_run_at, fire_at, task_id, event_id)
WHERE s.id = a.id;

-- name: delete_schedule
-- The tasks and events it made stay.
DELETE FROM schedules WHERE id = :id RETURNING id;

-- name: next_schedule_at
SELECT min(next_run_at) AS next_run_at FROM schedules
WHERE next_run_at IS NOT NULL AND NOT (id = ANY(:skip::text[]));
