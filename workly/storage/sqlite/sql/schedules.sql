-- Schedules for SQLite (workly/schedules.py, storage/sqlite/schedules.py). Every write
-- runs in the single writer's BEGIN IMMEDIATE transaction: no row locks are needed.

-- name: insert_schedule
INSERT INTO schedules (id, name, cron, timezone, template, paused, catch_up, next_run_at,
                       created_at, updated_at)
VALUES (:id, :name, :cron, :timezone, :template, :paused, :catch_up, :next_run_at, :now, :now)
RETURNING *;

-- name: get_schedule
SELECT * FROM schedules WHERE id = :id;

-- name: list_schedules
SELECT * FROM schedules WHERE seq < :before ORDER BY seq DESC LIMIT :limit;

-- name: lock_schedule
SELECT * FROM schedules WHERE id = :id;

-- name: lock_due_schedules
-- The schedules due now, the most overdue first.
-- :skip (a JSON array) names schedules this process cannot plan now (scheduler.py).
SELECT * FROM schedules
WHERE next_run_at <= :now AND id NOT IN (SELECT value FROM json_each(:skip))
ORDER BY next_run_at
LIMIT :limit;

-- name: update_schedule
UPDATE schedules
SET name = :name, cron = :cron, timezone = :timezone, template = :template, paused = :paused,
    catch_up = :catch_up, next_run_at = :next_run_at, updated_at = :now
WHERE id = :id;

-- name: advance_schedules
-- After a batch of firings, in one statement (:advances is a JSON array of objects): where
-- each schedule goes next and, when its firing made something, what.
UPDATE schedules AS s
SET next_run_at = a.next_run_at,
    last_run_at = coalesce(a.fire_at, s.last_run_at),
    last_task_id = CASE WHEN a.fire_at IS NULL THEN s.last_task_id ELSE a.task_id END,
    last_event_id = CASE WHEN a.fire_at IS NULL THEN s.last_event_id ELSE a.event_id END
FROM (SELECT value ->> '$.id' AS id, value ->> '$.next_run_at' AS next_run_at,
             value ->> '$.fire_at' AS fire_at, value ->> '$.task_id' AS task_id,
             value ->> '$.event_id' AS event_id
      FROM json_each(:advances)) AS a
WHERE s.id = a.id;

-- name: delete_schedule
-- The tasks and events it made stay.
DELETE FROM schedules WHERE id = :id RETURNING id;

-- name: next_schedule_at
SELECT min(next_run_at) AS next_run_at FROM schedules
WHERE next_run_at IS NOT NULL AND id NOT IN (SELECT value FROM json_each(:skip));
