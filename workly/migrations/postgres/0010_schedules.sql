-- Schedules (docs/schedules.md): a task or an event made by cron.
--
-- template: the task (with its queue) or the event each firing makes, as JSON
-- ({"task": {…}} or {"event": {…}}; storage/schedule_rows.py). next_run_at: when it fires
-- next (NULL: paused, or no fire time left). The scheduler of every process takes due rows
-- with FOR UPDATE SKIP LOCKED and, in the same transaction, stores what the firing makes
-- and moves next_run_at on: a firing is made once however many processes run.
CREATE TABLE schedules (
    seq           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id            text NOT NULL UNIQUE,
    name          text,
    cron          text NOT NULL,
    timezone      text NOT NULL,
    template      json NOT NULL,
    paused        boolean NOT NULL DEFAULT false,
    catch_up      text NOT NULL CHECK (catch_up IN ('latest', 'none')),
    next_run_at   timestamptz,
    last_run_at   timestamptz,
    last_task_id  text,
    last_event_id text,
    created_at    timestamptz NOT NULL,
    updated_at    timestamptz NOT NULL
);
CREATE INDEX schedules_due ON schedules (next_run_at) WHERE next_run_at IS NOT NULL;
