-- Queue controls (see the Postgres migration). SQLite has one writer, so the claim
-- counts running tasks itself (tasks_running) instead of keeping a counter.
ALTER TABLE queues ADD COLUMN rate_tokens REAL;
ALTER TABLE queues ADD COLUMN rate_at INTEGER;

CREATE TABLE queue_turns (
    queue       TEXT NOT NULL REFERENCES queues (name) ON DELETE CASCADE,
    tenant      TEXT NOT NULL,
    last_served INTEGER NOT NULL,
    PRIMARY KEY (queue, tenant)
);

DROP INDEX tasks_claim;
CREATE INDEX tasks_claim ON tasks (queue, priority DESC, run_at, seq)
    WHERE status = 'ready' AND tenant IS NULL AND key IS NULL;
CREATE INDEX tasks_claim_tenant ON tasks (queue, tenant, priority DESC, run_at, seq)
    WHERE status = 'ready' AND tenant IS NOT NULL AND key IS NULL;
CREATE INDEX tasks_claim_key ON tasks (queue, key, seq)
    WHERE status = 'ready' AND key IS NOT NULL;
CREATE INDEX tasks_running ON tasks (queue, key) WHERE status = 'running';
