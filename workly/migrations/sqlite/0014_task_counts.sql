-- Tasks per queue and status, kept as they change: GET /v1/queues and the dashboard read
-- this small table instead of counting the tasks table on every request. SQLite has one
-- writer at a time, so one row per queue and status, changed by row triggers, makes no one
-- wait (PostgreSQL appends changes instead, and folds them: its migration 0014 says why).
CREATE TABLE task_counts (
    queue  TEXT NOT NULL,
    status TEXT NOT NULL,
    n      INTEGER NOT NULL,
    PRIMARY KEY (queue, status)
) WITHOUT ROWID;

INSERT INTO task_counts (queue, status, n)
SELECT queue, status, count(*) FROM tasks GROUP BY queue, status;

CREATE TRIGGER tasks_counted_insert AFTER INSERT ON tasks
BEGIN
    INSERT INTO task_counts (queue, status, n) VALUES (new.queue, new.status, 1)
    ON CONFLICT (queue, status) DO UPDATE SET n = n + 1;
END;

CREATE TRIGGER tasks_counted_update AFTER UPDATE OF queue, status ON tasks
WHEN old.status IS NOT new.status OR old.queue IS NOT new.queue
BEGIN
    UPDATE task_counts SET n = n - 1 WHERE queue = old.queue AND status = old.status;
    INSERT INTO task_counts (queue, status, n) VALUES (new.queue, new.status, 1)
    ON CONFLICT (queue, status) DO UPDATE SET n = n + 1;
END;

CREATE TRIGGER tasks_counted_delete AFTER DELETE ON tasks
BEGIN
    UPDATE task_counts SET n = n - 1 WHERE queue = old.queue AND status = old.status;
END;
