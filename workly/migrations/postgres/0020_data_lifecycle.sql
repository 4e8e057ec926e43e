-- Data lifecycle (docs/retention.md): retention for every outcome, per queue and per
-- tenant; deletes; a tenant's erasure.
--
-- queues.retention: seconds its finished tasks are kept, overriding WORKLY_RETENTION and
-- WORKLY_FAILED_RETENTION (null: those).
ALTER TABLE queues ADD COLUMN retention bigint;

-- retired: the queue of a deleted endpoint, kept (paused, unlisted) while its finished
-- deliveries are, so they stay visible on their events until retention; then it goes.
ALTER TABLE queues ADD COLUMN retired boolean NOT NULL DEFAULT false;

-- Failed and canceled tasks expire too (WORKLY_FAILED_RETENTION): as tasks_succeeded
-- does for succeeded ones, a partial index in the order they finished, so each pruning
-- batch reads only what it deletes.
CREATE INDEX tasks_failed ON tasks (updated_at) WHERE status IN ('failed', 'canceled');

-- A tenant's plain tasks (tasks.tenant, its fairness key): what its erasure, its export
-- and its own retention read. Deliveries carry no tenant here (theirs is the event's).
CREATE INDEX tasks_tenant ON tasks (tenant, seq) WHERE tenant IS NOT NULL;

-- The callbacks of a task (they copy its body): deleted with it.
CREATE INDEX tasks_callback_of ON tasks (callback_of) WHERE callback_of IS NOT NULL;

-- Operations gain 'erase' (DELETE /v1/tenants/{tenant}), which goes through the tenant's
-- rows table by table: phase names the table it is at.
ALTER TABLE operations DROP CONSTRAINT operations_action_check;
ALTER TABLE operations ADD CONSTRAINT operations_action_check
    CHECK (action IN ('retry', 'cancel', 'replay', 'erase'));
ALTER TABLE operations ADD COLUMN phase text;
