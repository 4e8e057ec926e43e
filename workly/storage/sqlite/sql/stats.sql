-- Cheap counts for the API and the dashboard: the tasks per queue and status
-- (task_counts, kept by triggers, migration 0014) and the deliveries per minute
-- (delivery_minutes, migration 0015, workly/delivery_stats.py). Times are microseconds.

-- name: fold_task_counts
-- The triggers keep one row per queue and status; a queue's emptied rows go.
DELETE FROM task_counts WHERE n = 0;

-- name: miscounted_queues
-- The kept counts against the tasks, in one snapshot: a queue is listed when any of its
-- statuses' sums differ.
SELECT DISTINCT queue FROM (
    SELECT queue, status, sum(n) AS n FROM (
        SELECT queue, status, -count(*) AS n FROM tasks GROUP BY queue, status
        UNION ALL  -- tasks first: the order writers and TRUNCATE lock the two tables in
        SELECT queue, status, n FROM task_counts
    ) AS both_sides
    GROUP BY queue, status
    HAVING sum(n) <> 0
) AS differing
ORDER BY queue;

-- name: clear_task_counts
DELETE FROM task_counts;

-- name: count_tasks_into_counts
INSERT INTO task_counts (queue, status, n)
SELECT queue, status, count(*) FROM tasks GROUP BY queue, status;

-- name: add_delivery_minute
-- A process's counts of one series and minute, added to what other processes wrote.
INSERT INTO delivery_minutes (scope, name, minute, succeeded, retried, failed, b0, b1, b2, b3, b4, b5, b6, b7, b8, b9, b10, b11)
VALUES (:scope, :name, :minute, :succeeded, :retried, :failed, :b0, :b1, :b2, :b3, :b4, :b5, :b6, :b7, :b8, :b9, :b10, :b11)
ON CONFLICT (scope, name, minute) DO UPDATE SET
    succeeded = delivery_minutes.succeeded + excluded.succeeded,
    retried = delivery_minutes.retried + excluded.retried,
    failed = delivery_minutes.failed + excluded.failed,
    b0 = delivery_minutes.b0 + excluded.b0,
    b1 = delivery_minutes.b1 + excluded.b1,
    b2 = delivery_minutes.b2 + excluded.b2,
    b3 = delivery_minutes.b3 + excluded.b3,
    b4 = delivery_minutes.b4 + excluded.b4,
    b5 = delivery_minutes.b5 + excluded.b5,
    b6 = delivery_minutes.b6 + excluded.b6,
    b7 = delivery_minutes.b7 + excluded.b7,
    b8 = delivery_minutes.b8 + excluded.b8,
    b9 = delivery_minutes.b9 + excluded.b9,
    b10 = delivery_minutes.b10 + excluded.b10,
    b11 = delivery_minutes.b11 + excluded.b11;

-- name: delivery_minutes
SELECT scope, name, minute, succeeded, retried, failed, b0, b1, b2, b3, b4, b5, b6, b7, b8, b9, b10, b11
FROM delivery_minutes
WHERE scope = :scope AND name = :name AND minute >= :since
ORDER BY minute;

-- name: delivery_minutes_of_scope
-- Every queue's (or endpoint's) minutes: the dashboard overview's recent deliveries.
SELECT scope, name, minute, succeeded, retried, failed, b0, b1, b2, b3, b4, b5, b6, b7, b8, b9, b10, b11
FROM delivery_minutes
WHERE scope = :scope AND minute >= :since
ORDER BY name, minute;

-- name: prune_delivery_minutes
DELETE FROM delivery_minutes WHERE minute < :before;

-- name: delete_queue_minutes
-- With its queue: a queue made again under the name starts with an empty chart.
DELETE FROM delivery_minutes WHERE scope = 'queue' AND name = :queue;
