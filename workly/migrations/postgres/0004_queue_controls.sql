-- Queue controls that hold across processes: concurrency, rate limits, ordering keys and
-- tenant fairness live in the database, where every claiming process sees them.

-- running: deliveries of the queue in flight, in every process. Only claims (and the
-- recount) write it, with the queue row locked: results and the reaper append their
-- releases to queue_releases instead, and the next claim folds them in. So results never
-- wait for a queue row, and claims lock queue rows in name order.
-- rate_tokens/rate_at: the token bucket of rate_limit, as of rate_at.
ALTER TABLE queues
    ADD COLUMN running     integer NOT NULL DEFAULT 0,
    ADD COLUMN rate_tokens double precision,
    ADD COLUMN rate_at     timestamptz;
UPDATE queues q
SET running = (SELECT count(*) FROM tasks t WHERE t.queue = q.name AND t.status = 'running');

-- No foreign key: its check would lock the queue row from inside record_results, which
-- deadlocks with a DELETE of the queue waiting for that batch's task rows. delete_queue
-- removes a queue's releases itself.
CREATE TABLE queue_releases (
    queue text NOT NULL,
    n     integer NOT NULL
);
CREATE INDEX queue_releases_queue ON queue_releases (queue);

-- When each tenant of a queue last had a task claimed: the round-robin order. Only a
-- memo: a missing row means "never served" (first in line), so rows can go at any time.
CREATE TABLE queue_turns (
    queue       text NOT NULL REFERENCES queues (name) ON DELETE CASCADE,
    tenant      text NOT NULL,
    last_served timestamptz NOT NULL,
    PRIMARY KEY (queue, tenant)
);

-- The claim reads three disjoint kinds of ready task, each from its own partial index, so
-- a deep backlog of one kind never lies in the path of another (seed 004):
--   plain: no tenant, no key, in (priority, run_at, seq) order;
--   per tenant: one short descent per tenant that has ready work;
--   per key: the key's ready tasks in enqueue order (its head first).
DROP INDEX tasks_claim;
CREATE INDEX tasks_claim ON tasks (queue, priority DESC, run_at, seq)
    WHERE status = 'ready' AND tenant IS NULL AND key IS NULL;
CREATE INDEX tasks_claim_tenant ON tasks (queue, tenant, priority DESC, run_at, seq)
    WHERE status = 'ready' AND tenant IS NOT NULL AND key IS NULL;
CREATE INDEX tasks_claim_key ON tasks (queue, key, seq)
    WHERE status = 'ready' AND key IS NOT NULL;
-- Running tasks per queue and key: a key with one in flight is not claimed again.
CREATE INDEX tasks_running ON tasks (queue, key) WHERE status = 'running';
