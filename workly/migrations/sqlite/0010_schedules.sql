-- Schedules (docs/schedules.md): a task or an event made by cron.
--
-- template: the task (with its queue) or the event each firing makes, as JSON
-- ({"task": {…}} or {"event": {…}}; storage/schedule_rows.py). next_run_at: when it fires
-- next (NULL: paused, or no fire time left). The scheduler stores what a firing makes and
-- moves next_run_at on in one write transaction: a firing is made once.
CREATE TABLE schedules (
    seq           INTEGER PRIMARY KEY AUTOINCREMENT,
    id            TEXT NOT NULL UNIQUE,
    name          TEXT,
    cron          TEXT NOT NULL,
    timezone      TEXT NOT NULL,
    template      TEXT NOT NULL,
    paused        INTEGER NOT NULL DEFAULT 0,
    catch_up      TEXT NOT NULL CHECK (catch_up IN ('latest', 'none')),
    next_run_at   INTEGER,
    last_run_at   INTEGER,
    last_task_id  TEXT,
    last_event_id TEXT,
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL
);
CREATE INDEX schedules_due ON schedules (next_run_at) WHERE next_run_at IS NOT NULL;
