-- Workly queries for PostgreSQL (workly/storage/queries.py says how they are named and
-- bound). Parameters are :name; times come from the caller (:now), never from now(), so
-- tests control the clock.

-- name: enqueue_tasks
-- The whole enqueue in one statement, so it needs no BEGIN/COMMIT round trips: create
-- missing queues (in name order, so concurrent creators cannot deadlock), insert the
-- tasks in input order (the FIFO order), and return them as task_view shows them.
-- Rows whose idempotency key or id is taken are skipped (ON CONFLICT) and not returned;
-- the caller then reads the existing ones. A queue created by this statement is read from
-- new_queues: the statement's snapshot cannot see it in queues. A task whose breaker is
-- open is held (run_at :held_until, held_run_at its own) until the breaker closes.
WITH new_queues AS (
    INSERT INTO queues (name, created_at, updated_at)
    SELECT name, :now, :now FROM (SELECT DISTINCT unnest(:queue_array::text[]) AS name) AS wanted ORDER BY name
    ON CONFLICT (name) DO NOTHING
    RETURNING name, max_attempts, timeout, stop_on, deadline, min_backoff, max_backoff
),
inserted AS (
    -- The columns a NewTask gives (storage/task_shape.py), then the statement's own.
    INSERT INTO tasks (@task_columns@, status, run_at, held_run_at, created_at, updated_at)
    SELECT @task_values(r)@, 'ready',
           CASE WHEN b.key IS NULL THEN coalesce(r.run_at, :now) ELSE :held_until END,
           CASE WHEN b.key IS NOT NULL THEN coalesce(r.run_at, :now) END,
           :now, :now
    FROM unnest(@task_arrays@) WITH ORDINALITY AS r(@task_fields@, ord)
    LEFT JOIN breakers b ON b.key = r.breaker AND b.position = 'open'
    ORDER BY r.ord
    -- Any unique conflict: a taken idempotency key, or a task id stored by an earlier
    -- try of this same request (its commit went through, its answer did not). No conflict
    -- target, on purpose: then every unique index is an arbiter, the copy a REINDEX
    -- CONCURRENTLY is building included (postgres/indexes.py); a target names only valid
    -- ones, and the copy's uniqueness check would fail the insert instead.
    ON CONFLICT DO NOTHING
    RETURNING *
)
-- The same columns as task_view. Both joins miss only a queue that another transaction
-- created concurrently; the caller re-reads such rows.
SELECT i.seq, i.id, i.queue, i.status, i.url, i.method, i.headers, i.body,
       coalesce(i.held_run_at, i.run_at) AS run_at, i.priority,
       i.key, i.tenant, i.idempotency_key, i.attempts,
       coalesce(i.max_attempts, q.max_attempts, n.max_attempts) AS max_attempts,
       coalesce(i.timeout, q.timeout, n.timeout) AS timeout,
       i.last_status_code, i.last_error, i.created_at, i.updated_at, i.event_id, i.endpoint_id,
       coalesce(i.stop_on, q.stop_on, n.stop_on) AS stop_on,
       coalesce(i.deadline, q.deadline, n.deadline) AS deadline,
       coalesce(i.min_backoff, q.min_backoff, n.min_backoff) AS min_backoff,
       coalesce(i.max_backoff, q.max_backoff, n.max_backoff) AS max_backoff,
       i.callback_url, i.failure_callback_url, i.callback_of,
       NULL::text AS lease_holder, NULL::timestamptz AS lease_expires_at  -- a new task is not leased
FROM inserted i
LEFT JOIN queues q ON q.name = i.queue
LEFT JOIN new_queues n ON n.name = i.queue;

-- name: enqueue_tasks_leasing
-- enqueue_tasks with eager dispatch (docs/queues.md): of the tasks it inserts, those a
-- claim would take at once and first are inserted already leased to this process's
-- dispatcher, which holds :limit slots free for them. Only tasks due now, of no tenant and
-- no ordering key, not held by a breaker, in a queue of :lease_queues that is not paused,
-- has no rate limit, is no endpoint's, has room under max_concurrency and holds no other
-- ready task (due or not; the statement's snapshot does not see its own inserts). The
-- queues are locked in name order and their releases folded, as the claim does both;
-- their running counts grow by what was leased. In the same statement, not a second one:
-- that cost a transaction, four round trips where the enqueue has one. (Not enqueue_tasks
-- itself with no queues to lease in: planning this statement costs four times as much.)
-- The answer shows every task as accepted (ready, no attempts); a leased one (leased)
-- also carries the columns claim_tasks returns. A queue this statement creates is not
-- leased into (its snapshot cannot see it), nor is a batch with idempotency keys (the
-- caller uses enqueue_tasks): its insert may wait for another transaction holding the
-- same key, an application's with workly.enqueue_task, and must not wait holding queue
-- rows.
WITH new_queues AS (
    INSERT INTO queues (name, created_at, updated_at)
    SELECT name, :now, :now FROM (SELECT DISTINCT unnest(:queue_array::text[]) AS name) AS wanted ORDER BY name
    ON CONFLICT (name) DO NOTHING
    RETURNING name, max_attempts, timeout, stop_on, deadline, min_backoff, max_backoff
),
room AS (
    SELECT q.name, q.running, q.max_concurrency, q.timeout
    FROM queues q
    -- After new_queues, always: its insert may wait for another transaction creating the
    -- same queue, and must not wait holding these rows (a claim would wait behind them).
    -- The queues' array in a sub-select: the plan then cannot count its elements, so the
    -- plan made for one call costs what a generic one does, and PostgreSQL keeps a generic
    -- plan after five calls instead of planning every call anew (1 ms each; see
    -- tools/bench/statement_costs.py).
    WHERE (SELECT count(*) FROM new_queues) >= 0
      AND q.name = ANY((SELECT :lease_queues::text[])::text[]) AND NOT q.paused AND q.rate_limit IS NULL
      AND NOT EXISTS (SELECT 1 FROM breakers k WHERE k.key = q.name)
      -- Nothing ready: one probe of each claim index, as the claim's (claim_tasks says why so).
      AND (SELECT 1 FROM tasks w
           WHERE w.queue = q.name AND w.status = 'ready' AND w.tenant IS NULL AND w.key IS NULL
           ORDER BY w.priority DESC, w.run_at, w.seq LIMIT 1) IS NULL
      AND (SELECT 1 FROM tasks w
           WHERE w.queue = q.name AND w.status = 'ready' AND w.tenant IS NOT NULL AND w.key IS NULL
           ORDER BY w.tenant, w.priority DESC, w.run_at, w.seq LIMIT 1) IS NULL
      AND (SELECT 1 FROM tasks w WHERE w.queue = q.name AND w.status = 'ready' AND w.key IS NOT NULL
           ORDER BY w.key, w.seq LIMIT 1) IS NULL
    ORDER BY q.name
    FOR NO KEY UPDATE OF q
),
released AS (
    DELETE FROM queue_releases r USING room l
    WHERE r.queue = l.name
    RETURNING r.queue, r.n
),
budget AS (
    SELECT l.name, l.timeout, l.running - coalesce(f.n, 0) AS running, coalesce(f.n, 0) AS folded,
           l.max_concurrency - (l.running - coalesce(f.n, 0)) AS free
    FROM room l
    LEFT JOIN (SELECT queue, sum(n)::int AS n FROM released GROUP BY queue) f ON f.queue = l.name
),
given AS (
    SELECT r.*, b.key IS NOT NULL AS held
    FROM unnest(@task_arrays@) WITH ORDINALITY AS r(@task_fields@, ord)
    LEFT JOIN breakers b ON b.key = r.breaker AND b.position = 'open'
),
picked AS (
    SELECT g.ord, g.priority, b.free, coalesce(g.timeout, b.timeout) AS timeout,
           row_number() OVER (PARTITION BY g.queue ORDER BY g.priority DESC, g.ord) AS place
    FROM given g JOIN budget b ON b.name = g.queue
    WHERE coalesce(g.run_at, :now) <= :now AND g.tenant IS NULL AND g.key IS NULL
      AND g.endpoint_id IS NULL AND NOT g.held
),
chosen AS (
    SELECT ord, timeout FROM picked WHERE place <= free ORDER BY priority DESC, ord LIMIT :limit
),
inserted AS (
    -- The columns a NewTask gives (storage/task_shape.py), then the statement's own.
    INSERT INTO tasks (@task_columns@, status, run_at, held_run_at, created_at, updated_at,
                       attempts, lease_token, lease_expires_at)
    SELECT @task_values(g)@, CASE WHEN c.ord IS NULL THEN 'ready' ELSE 'running' END,
           CASE WHEN g.held THEN :held_until ELSE coalesce(g.run_at, :now) END,
           CASE WHEN g.held THEN coalesce(g.run_at, :now) END,
           :now, :now,
           CASE WHEN c.ord IS NULL THEN 0 ELSE 1 END,
           CASE WHEN c.ord IS NOT NULL THEN :lease_token END,
           :now + make_interval(secs => c.timeout + :lease_margin)
    FROM given g
    LEFT JOIN chosen c ON c.ord = g.ord
    ORDER BY g.ord
    -- Any unique conflict: a taken idempotency key, or a task id stored by an earlier
    -- try of this same request (its commit went through, its answer did not). No conflict
    -- target, on purpose: then every unique index is an arbiter, the copy a REINDEX
    -- CONCURRENTLY is building included (postgres/indexes.py); a target names only valid
    -- ones, and the copy's uniqueness check would fail the insert instead.
    ON CONFLICT DO NOTHING
    RETURNING *
),
counted AS (
    UPDATE queues q
    SET running = b.running + coalesce(n.n, 0)
    FROM budget b
    LEFT JOIN (SELECT queue, count(*)::int AS n FROM inserted WHERE status = 'running' GROUP BY queue) n
           ON n.queue = b.name
    WHERE q.name = b.name AND (n.n > 0 OR b.folded > 0)
)
-- enqueue_tasks' columns (a leased task shown as accepted), then claim_tasks' for a leased one.
SELECT i.seq, i.id, i.queue, 'ready' AS status, i.url, i.method, i.headers, i.body,
       coalesce(i.held_run_at, i.run_at) AS run_at, i.priority,
       i.key, i.tenant, i.idempotency_key, 0 AS attempts,
       coalesce(i.max_attempts, q.max_attempts, n.max_attempts) AS max_attempts,
       -- A leased task's from the queue row it was leased under, as its lease's length.
       coalesce(i.timeout, b.timeout, q.timeout, n.timeout) AS timeout,
       i.last_status_code, i.last_error, i.created_at, i.updated_at, i.event_id, i.endpoint_id,
       coalesce(i.stop_on, q.stop_on, n.stop_on) AS stop_on,
       coalesce(i.deadline, q.deadline, n.deadline) AS deadline,
       coalesce(i.min_backoff, q.min_backoff, n.min_backoff) AS min_backoff,
       coalesce(i.max_backoff, q.max_backoff, n.max_backoff) AS max_backoff,
       i.callback_url, i.failure_callback_url, i.callback_of,
       NULL::text AS lease_holder, NULL::timestamptz AS lease_expires_at,
       i.lease_token IS NOT NULL AS leased, i.attempts AS attempt, q.signing_secret, i.breaker,
       i.attempt_base, i.created_at AS budget_at,
       (i.callback_url IS NOT NULL OR i.failure_callback_url IS NOT NULL) AS capture_response,
       i.traceparent, i.tracestate
FROM inserted i
LEFT JOIN queues q ON q.name = i.queue
LEFT JOIN new_queues n ON n.name = i.queue
LEFT JOIN budget b ON b.name = i.queue AND i.lease_token IS NOT NULL;

-- name: get_leased_tasks
-- The tasks among :ids running under :lease_token, as claim_tasks returns them: what an
-- enqueue whose caller did not learn its outcome leased (eager dispatch).
SELECT t.seq, t.id, t.queue, t.url, t.method, t.headers, t.body, t.attempts AS attempt,
       coalesce(t.max_attempts, q.max_attempts) AS max_attempts, coalesce(t.timeout, q.timeout) AS timeout,
       coalesce(t.min_backoff, q.min_backoff) AS min_backoff, coalesce(t.max_backoff, q.max_backoff) AS max_backoff,
       q.signing_secret, t.priority, t.run_at, t.event_id, t.endpoint_id, t.breaker, t.attempt_base,
       coalesce(t.stop_on, q.stop_on) AS stop_on, coalesce(t.deadline, q.deadline) AS deadline,
       coalesce(t.budget_at, t.created_at) AS budget_at,
       (t.callback_url IS NOT NULL OR t.failure_callback_url IS NOT NULL) AS capture_response,
       t.traceparent, t.tracestate
FROM tasks t JOIN queues q ON q.name = t.queue
WHERE t.id = ANY(:ids::text[]) AND t.lease_token = :lease_token AND t.status = 'running'
ORDER BY t.priority DESC, t.seq;

-- name: get_tasks_by_ids
SELECT * FROM task_view WHERE id = ANY(:ids::text[]);

-- name: get_tasks_by_idempotency_keys
SELECT * FROM task_view
WHERE (queue, idempotency_key) IN (SELECT * FROM unnest(:queues::text[], :keys::text[]));

-- name: get_task
SELECT * FROM task_view WHERE id = :id;

-- name: list_tasks
SELECT * FROM task_view WHERE queue = :queue AND seq < :before ORDER BY seq DESC LIMIT :limit;

-- name: list_tasks_by_status
SELECT * FROM task_view WHERE queue = :queue AND status = :status AND seq < :before ORDER BY seq DESC LIMIT :limit;

-- name: list_all_tasks
SELECT * FROM task_view WHERE seq < :before ORDER BY seq DESC LIMIT :limit;

-- name: list_all_tasks_by_status
-- Newest first across queues: each queue's newest matches from tasks_queue_status, merged.
-- Reads at most (queues × limit) index entries, however rare the status is in a big table.
SELECT v.* FROM queues q
CROSS JOIN LATERAL (
    SELECT seq FROM tasks
    WHERE queue = q.name AND status = :status AND seq < :before
    ORDER BY seq DESC LIMIT :limit
) AS t
JOIN task_view v ON v.seq = t.seq
ORDER BY v.seq DESC LIMIT :limit;

-- name: list_attempts
SELECT t.id AS task_id, a.attempt, a.started_at, a.finished_at, a.status_code, a.error,
       a.response, a.stale
FROM attempts a JOIN tasks t ON t.seq = a.task_seq
WHERE t.id = :id
ORDER BY a.id;

-- name: cancel_task
UPDATE tasks SET status = 'canceled', run_at = coalesce(held_run_at, run_at), held_run_at = NULL,
                 updated_at = :now
WHERE id = :id AND status = 'ready'
RETURNING seq;

-- name: retry_task
-- A failed or canceled task is redriven: ready, due now (held, see enqueue_tasks, when its
-- breaker is open), its attempts go on counting and its budget (max_attempts, deadline)
-- starts over. A ready task waiting for its next attempt is made due now (a held one
-- stays held, due now once its breaker closes).
UPDATE tasks
SET status = 'ready', updated_at = :now,
    attempt_base = CASE WHEN status = 'ready' THEN attempt_base ELSE attempts END,
    budget_at = CASE WHEN status = 'ready' THEN budget_at ELSE :now::timestamptz END,
    -- an event's delivery goes to its endpoint's URL of now
    url = CASE WHEN status = 'ready' THEN url
               ELSE coalesce((SELECT e.url FROM endpoints e WHERE e.id = tasks.endpoint_id), url) END,
    run_at = CASE WHEN (status = 'ready' AND held_run_at IS NULL) OR (status <> 'ready' AND NOT o.open)
                  THEN :now::timestamptz ELSE :held_until::timestamptz END,
    held_run_at = CASE WHEN (status = 'ready' AND held_run_at IS NULL) OR (status <> 'ready' AND NOT o.open)
                       THEN NULL ELSE :now::timestamptz END
FROM (SELECT EXISTS (SELECT 1 FROM breakers b JOIN tasks t ON b.key = t.breaker
                     WHERE t.id = :id AND b.position = 'open') AS open) o
WHERE id = :id AND status IN ('failed', 'canceled', 'ready')
  -- never in the retired queue of a deleted endpoint (nothing would send it)
  AND NOT EXISTS (SELECT 1 FROM queues rq WHERE rq.name = tasks.queue AND rq.retired)
RETURNING seq;

-- name: claim_tasks
-- One statement; see docs/queues.md for the rules it enforces, migration 0004 for the
-- indexes it reads, and workly/storage/claim_rules.py for the rulebook: the claim_<rule>
-- functions called here (migration 0006) are its rules, and the order of steps 5 and 6
-- is its choose(). SQLite's claim (sqlite/claim.py) calls the same rules in Python.
--
-- 1. Lock every unpaused queue that may have room and holds a ready task, in name order.
--    The limits live in these rows, so a second process's claim waits here and then reads
--    what this one wrote (FOR UPDATE returns the newest row version). NO KEY UPDATE: the
--    foreign key checks of concurrent enqueues do not wait for it. A queue with nothing
--    ready is not locked: a claim after every delivery's end would otherwise hold the row
--    an eager enqueue locks (enqueue_tasks_leasing), for nothing; its releases wait for
--    that enqueue or the next claim with work to fold them (the counter less the releases
--    stays the running count, as recount_running keeps it). An endpoint's queue is skipped
--    while its breaker is open with no probe out (its tasks are all held), and runs one
--    delivery at a time while it is failing (workly/breaker.py).
-- 2. Fold the releases that results and the reaper appended since the last claim.
-- 3. Each queue's take: its free concurrency, its whole rate tokens, the batch size.
-- 4. Candidates, each locked with SKIP LOCKED, from three disjoint indexes: plain tasks;
--    per tenant (a skip scan finds the tenants with ready work, each gets its share);
--    per key (in an ordering=key queue only a key's head, and only when none of its
--    tasks runs; heads are read unlocked and only the chosen ones locked, in step 6, so
--    SKIP LOCKED can never hand out the task behind a head another process holds).
-- 5. Order each queue's candidates in rounds (every group's best, then every group's
--    second...; tenants least recently served first), keep its take, interleave queues
--    by round so a busy queue cannot starve the others, keep the batch.
-- 6. Claim them, write the queues' new counts and tokens and the tenants' turns.
-- One more row, with no task (seq is null), says when to claim again (see the end).
WITH locked AS (
    SELECT q.name, q.running, q.rate_limit, q.rate_tokens, q.rate_at, q.ordering,
           CASE WHEN k.consecutive_failures > 0 THEN least(q.max_concurrency, 1)
                ELSE q.max_concurrency END AS max_concurrency
    FROM queues q
    LEFT JOIN breakers k ON k.key = q.name
    WHERE NOT q.paused
      AND (k.position IS DISTINCT FROM 'open' OR k.probe_seq IS NOT NULL)
      AND (q.running < CASE WHEN k.consecutive_failures > 0 THEN least(q.max_concurrency, 1)
                            ELSE q.max_concurrency END
           OR EXISTS (SELECT 1 FROM queue_releases r WHERE r.queue = q.name))
      -- Whether it holds a ready task: one probe of each claim index, each a scalar subquery
      -- in its index's order. Under a deep backlog the planner made a scan of the table of an
      -- EXISTS or of a LIMIT 1 without an order, and walked the primary key for an order by
      -- seq (test_claim_plan.py); no other index gives these orders.
      AND ((SELECT 1 FROM tasks w
            WHERE w.queue = q.name AND w.status = 'ready' AND w.tenant IS NULL AND w.key IS NULL
            ORDER BY w.priority DESC, w.run_at, w.seq LIMIT 1) IS NOT NULL
           OR (SELECT 1 FROM tasks w
               WHERE w.queue = q.name AND w.status = 'ready' AND w.tenant IS NOT NULL AND w.key IS NULL
               ORDER BY w.tenant, w.priority DESC, w.run_at, w.seq LIMIT 1) IS NOT NULL
           OR (SELECT 1 FROM tasks w WHERE w.queue = q.name AND w.status = 'ready' AND w.key IS NOT NULL
               ORDER BY w.key, w.seq LIMIT 1) IS NOT NULL)
    ORDER BY q.name
    FOR NO KEY UPDATE OF q
),
released AS (
    DELETE FROM queue_releases r USING locked l
    WHERE r.queue = l.name
    RETURNING r.queue, r.n
),
budget AS (
    SELECT b.*, claim_take(b.max_concurrency, b.running, b.tokens, :limit) AS take
    FROM (
        SELECT l.name, l.max_concurrency, l.ordering, l.rate_limit,
               l.running - coalesce(f.n, 0) AS running,
               coalesce(f.n, 0) AS folded,
               CASE WHEN l.rate_limit IS NOT NULL THEN
                   claim_tokens_now(l.rate_limit, l.rate_tokens,
                                    extract(epoch FROM :now::timestamptz - l.rate_at)::float8)
               END AS tokens
        FROM locked l
        LEFT JOIN (SELECT queue, sum(n)::int AS n FROM released GROUP BY queue) f
               ON f.queue = l.name
    ) b
),
plain AS (
    SELECT c.seq, b.name AS queue, 'p'::text AS kind, ''::text AS grp, c.priority, c.run_at
    FROM budget b
    CROSS JOIN LATERAL (
        SELECT t.seq, t.priority, t.run_at
        FROM tasks t
        WHERE t.queue = b.name AND t.status = 'ready' AND t.tenant IS NULL AND t.key IS NULL
          AND t.run_at <= :now
        ORDER BY t.priority DESC, t.run_at, t.seq
        LIMIT b.take
        FOR UPDATE SKIP LOCKED
    ) c
    WHERE b.take > 0
),
tenants AS (
    -- A skip scan per queue with room: one index descent per tenant that has ready work.
    -- The step seeks past the last (queue, tenant) pair, which the index can use as a
    -- bound; it ends one step into the next queue.
    SELECT b.name AS queue, g.tenant
    FROM budget b
    CROSS JOIN LATERAL (
        WITH RECURSIVE g (queue, tenant) AS (
            (SELECT queue, tenant FROM tasks
             WHERE queue = b.name AND status = 'ready' AND tenant IS NOT NULL AND key IS NULL
             ORDER BY queue, tenant LIMIT 1)
            UNION ALL
            SELECT n.queue, n.tenant
            FROM g
            CROSS JOIN LATERAL (
                SELECT queue, tenant FROM tasks
                WHERE status = 'ready' AND tenant IS NOT NULL AND key IS NULL
                  AND (queue, tenant) > (g.queue, g.tenant)
                ORDER BY queue, tenant LIMIT 1
            ) n
            WHERE g.queue = b.name
        )
        SELECT tenant FROM g WHERE queue = b.name
    ) g
    WHERE b.take > 0
),
tenant_shares AS (
    SELECT g.queue, g.tenant,
           claim_share(b.take, (count(*) OVER (PARTITION BY g.queue))::int) AS share
    FROM tenants g JOIN budget b ON b.name = g.queue
    WHERE b.take > 0
),
by_tenant AS (
    SELECT c.seq, s.queue, 't'::text AS kind, s.tenant AS grp, c.priority, c.run_at
    FROM tenant_shares s
    CROSS JOIN LATERAL (
        SELECT t.seq, t.priority, t.run_at
        FROM tasks t
        WHERE t.queue = s.queue AND t.tenant = s.tenant AND t.status = 'ready' AND t.key IS NULL
          AND t.run_at <= :now
        ORDER BY t.priority DESC, t.run_at, t.seq
        LIMIT s.share
        FOR UPDATE SKIP LOCKED
    ) c
),
keys AS (
    SELECT b.name AS queue, g.key
    FROM budget b
    CROSS JOIN LATERAL (
        WITH RECURSIVE g (queue, key) AS (
            (SELECT queue, key FROM tasks
             WHERE queue = b.name AND status = 'ready' AND key IS NOT NULL
             ORDER BY queue, key LIMIT 1)
            UNION ALL
            SELECT n.queue, n.key
            FROM g
            CROSS JOIN LATERAL (
                SELECT queue, key FROM tasks
                WHERE status = 'ready' AND key IS NOT NULL AND (queue, key) > (g.queue, g.key)
                ORDER BY queue, key LIMIT 1
            ) n
            WHERE g.queue = b.name
        )
        SELECT key FROM g WHERE queue = b.name
    ) g
    WHERE b.take > 0
),
key_shares AS (
    SELECT g.queue, g.key, b.ordering,
           claim_share(b.take, (count(*) OVER (PARTITION BY g.queue))::int) AS share
    FROM keys g JOIN budget b ON b.name = g.queue
    WHERE b.take > 0
),
by_key AS (
    SELECT h.seq, s.queue, 'k'::text AS kind, s.key AS grp, h.priority, h.run_at
    FROM key_shares s
    CROSS JOIN LATERAL (
        SELECT t.seq, t.priority, t.run_at
        FROM tasks t
        WHERE t.queue = s.queue AND t.key = s.key AND t.status = 'ready'
        ORDER BY t.seq
        LIMIT 1
    ) h
    WHERE s.ordering = 'key' AND h.run_at <= :now
      AND NOT EXISTS (SELECT 1 FROM tasks r
                      WHERE r.queue = s.queue AND r.key = s.key AND r.status = 'running')
    UNION ALL
    SELECT c.seq, s.queue, 'k'::text AS kind, s.key AS grp, c.priority, c.run_at
    FROM key_shares s
    CROSS JOIN LATERAL (
        SELECT t.seq, t.priority, t.run_at
        FROM tasks t
        WHERE s.ordering = 'none'
          AND t.queue = s.queue AND t.key = s.key AND t.status = 'ready' AND t.run_at <= :now
        ORDER BY t.seq
        LIMIT s.share
        FOR UPDATE SKIP LOCKED
    ) c
),
rounds AS (
    SELECT c.*, row_number() OVER (PARTITION BY c.queue, c.kind, c.grp
                                   ORDER BY c.priority DESC, c.run_at, c.seq) AS round
    FROM (SELECT * FROM plain UNION ALL SELECT * FROM by_tenant UNION ALL SELECT * FROM by_key) c
),
placed AS (
    SELECT r.*, row_number() OVER (PARTITION BY r.queue
                                   ORDER BY r.round, r.priority DESC, m.last_served NULLS FIRST,
                                            r.run_at, r.seq) AS place
    FROM rounds r
    LEFT JOIN queue_turns m ON r.kind = 't' AND m.queue = r.queue AND m.tenant = r.grp
),
chosen AS (
    SELECT p.*
    FROM placed p JOIN budget b ON b.name = p.queue
    WHERE p.place <= b.take
    ORDER BY p.place, p.priority DESC, p.run_at, p.seq
    LIMIT :limit
),
held_heads AS (
    -- Key heads were read unlocked (a head is the key's oldest ready task, and SKIP LOCKED
    -- must not move on to the task behind it): lock the chosen ones now, skipping a head
    -- another process holds. The other candidates were locked as they were read.
    SELECT t.seq FROM tasks t
    WHERE t.seq IN (SELECT seq FROM chosen WHERE kind = 'k') AND t.status = 'ready'
      AND t.run_at <= :now  -- rechecked on the newest version: it may have run and be retrying
    FOR UPDATE OF t SKIP LOCKED
),
held AS (
    SELECT seq FROM chosen WHERE kind <> 'k'
    UNION ALL
    SELECT seq FROM held_heads
),
claimed AS (
    UPDATE tasks t
    SET status = 'running',
        attempts = t.attempts + 1,
        lease_token = :lease_token,
        lease_expires_at = :now + make_interval(secs => coalesce(t.timeout, q.timeout) + :lease_margin),
        updated_at = :now
    FROM held c, queues q
    WHERE t.seq = c.seq AND q.name = t.queue
    RETURNING t.seq, t.id, t.queue, t.url, t.method, t.headers, t.body, t.attempts AS attempt,
              coalesce(t.max_attempts, q.max_attempts) AS max_attempts,
              coalesce(t.timeout, q.timeout) AS timeout,
              coalesce(t.min_backoff, q.min_backoff) AS min_backoff,
              coalesce(t.max_backoff, q.max_backoff) AS max_backoff,
              q.signing_secret, t.priority, t.run_at, t.event_id, t.endpoint_id, t.breaker,
              t.attempt_base, coalesce(t.stop_on, q.stop_on) AS stop_on,
              coalesce(t.deadline, q.deadline) AS deadline, coalesce(t.budget_at, t.created_at) AS budget_at,
              (t.callback_url IS NOT NULL OR t.failure_callback_url IS NOT NULL) AS capture_response,
              t.traceparent, t.tracestate
),
share_filled AS (
    -- Tenants and keys (of ordering=none queues) that gave their whole share: they may
    -- hold more, so a short batch from their queue does not mean nothing more is due.
    SELECT s.queue FROM tenant_shares s
    WHERE s.share <= (SELECT count(*) FROM by_tenant c WHERE c.queue = s.queue AND c.grp = s.tenant)
    UNION
    SELECT s.queue FROM key_shares s
    WHERE s.ordering = 'none'
      AND s.share <= (SELECT count(*) FROM by_key c WHERE c.queue = s.queue AND c.grp = s.key)
),
per_queue AS (
    SELECT b.name, b.max_concurrency, b.running, b.folded, b.rate_limit, b.tokens, b.take,
           (SELECT count(*)::int FROM claimed c WHERE c.queue = b.name) AS n,
           b.name IN (SELECT queue FROM share_filled) AS filled_shares
    FROM budget b
),
counted AS (
    UPDATE queues q
    SET running = p.running + p.n,
        -- A bucket is written only when it was spent from (as in sqlite/claim.py).
        rate_tokens = CASE WHEN p.rate_limit IS NOT NULL AND p.n > 0 THEN p.tokens - p.n
                           ELSE q.rate_tokens END,
        -- Never backwards: a process whose clock lags must not refill the bucket twice.
        rate_at = CASE WHEN p.rate_limit IS NOT NULL AND p.n > 0
                       THEN greatest(q.rate_at, :now::timestamptz) ELSE q.rate_at END
    FROM per_queue p
    WHERE q.name = p.name AND (p.n > 0 OR p.folded > 0)
),
turns AS (
    INSERT INTO queue_turns (queue, tenant, last_served)
    SELECT DISTINCT c.queue, c.grp, :now::timestamptz FROM chosen c WHERE c.kind = 't'
    ON CONFLICT (queue, tenant) DO UPDATE SET last_served = excluded.last_served
),
-- The claim commits without waiting for its WAL flush, as SQLite's bookkeeping commits with
-- synchronous=NORMAL (docs/reliability.md): a claim lost to an OS crash only means its tasks
-- are delivered again, and the next synchronous commit (an enqueue) makes it durable. The
-- row without a task, always returned, reads it, so it always runs.
async_commit AS (
    SELECT set_config('synchronous_commit', 'off', true)
)
SELECT c.*, o.place, NULL::float8 AS wait, NULL::boolean AS more
FROM claimed c JOIN chosen o ON o.seq = c.seq
UNION ALL
-- The row without a task (seq is null): the wait (s) until a rate-limited queue with room
-- has its next token, and whether a queue may have more due than it gave (see share_filled).
SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
       NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
       (SELECT min(claim_rate_wait(p.rate_limit, p.tokens - p.n)) FROM per_queue p
        WHERE p.rate_limit IS NOT NULL AND p.running + p.n < p.max_concurrency),
       coalesce((SELECT bool_or(p.n < p.take AND p.filled_shares) FROM per_queue p), false)
FROM async_commit;

-- name: record_results
-- One statement per batch: update the tasks whose lease is still ours, release their
-- queues' concurrency (folded in by the next claim), then keep every attempt that was
-- sent, marking those whose lease was lost as stale (the fence). :ok_keys are breakers whose receiver
-- answered (the batch's last word on them): each closes. The tasks a closed breaker held
-- are freed by release_held_tasks after this statement (postgres.py): its snapshot, taken
-- once the breaker row is locked, sees every task held before, which this one may not.
-- The row is written only when that changes something, or to move last_success_at on
-- (at most once a second), so a healthy receiver's successes write no breaker row.
WITH r AS (
    SELECT r.*,
           EXISTS (SELECT 1 FROM tasks t JOIN breakers b ON b.key = t.breaker
                   WHERE t.seq = r.task_seq AND b.position = 'open'
                     AND b.probe_seq IS DISTINCT FROM t.seq AND NOT b.key = ANY(:ok_keys::text[])) AS held
    FROM unnest(:task_seqs::bigint[], :lease_tokens::text[], :attempts::int[], :started_ats::timestamptz[], :finished_ats::timestamptz[],
                :status_codes::int[], :errors::text[], :responses::bytea[], :outcomes::text[], :next_run_ats::timestamptz[],
                :sents::boolean[])
         AS r(task_seq, lease_token, attempt, started_at, finished_at, status_code, error,
              response, outcome, next_run_at, sent)
),
-- The batch's tasks still under its leases, locked in seq order before any is written: two
-- writers that each take their rows in one order cannot deadlock (the heartbeat skips what
-- this holds). A stale result locks nothing: the task is another lease's now.
mine AS (
    SELECT t.seq FROM tasks t
    WHERE (t.seq, t.lease_token) IN (SELECT task_seq, lease_token FROM r) AND t.status = 'running'
    ORDER BY t.seq
    FOR NO KEY UPDATE OF t
),
updated AS (
    UPDATE tasks t
    SET status = CASE r.outcome WHEN 'retry' THEN 'ready' ELSE r.outcome END,
        -- A retry waits for its breaker while that is open (unless it is the probe, whose
        -- failure reopens the breaker after this statement, or its breaker closes in it).
        run_at = CASE WHEN r.outcome <> 'retry' THEN t.run_at
                      WHEN r.held THEN :held_until::timestamptz ELSE r.next_run_at END,
        held_run_at = CASE WHEN r.outcome = 'retry' AND r.held THEN r.next_run_at END,
        last_status_code = r.status_code,
        last_error = r.error,
        lease_token = NULL,
        lease_expires_at = NULL,
        -- A task claimed after its deadline was not sent: its claim made no attempt.
        attempts = CASE WHEN r.sent THEN t.attempts ELSE t.attempts - 1 END,
        -- A final outcome with a callback to send: service/callbacks.py sends it.
        callback_due = CASE r.outcome WHEN 'succeeded' THEN t.callback_url IS NOT NULL
                                      WHEN 'failed' THEN t.failure_callback_url IS NOT NULL
                                      ELSE t.callback_due END,
        callback_seq = CASE WHEN (r.outcome = 'succeeded' AND t.callback_url IS NOT NULL)
                              OR (r.outcome = 'failed' AND t.failure_callback_url IS NOT NULL)
                            THEN t.callback_seq + 1 ELSE t.callback_seq END,
        updated_at = :now
    FROM r, mine m
    WHERE t.seq = r.task_seq AND m.seq = t.seq AND t.lease_token = r.lease_token AND t.status = 'running'
    RETURNING t.seq, t.queue, r.lease_token
),
released AS (
    INSERT INTO queue_releases (queue, n)
    SELECT queue, count(*) FROM updated GROUP BY queue
),
closing AS (
    SELECT b.key, b.position AS was
    FROM breakers b
    WHERE b.key = ANY(:ok_keys::text[])
      AND (b.position = 'open' OR b.consecutive_failures > 0 OR b.last_success_at IS NULL
           OR b.last_success_at < :now::timestamptz - interval '1 second')
    ORDER BY b.key
    FOR UPDATE
),
closed AS (
    UPDATE breakers b
    SET position = 'closed', consecutive_failures = 0, failing_since = NULL, probe_at = NULL,
        probe_seq = NULL, cooldown = NULL, last_success_at = :now
    FROM closing c
    WHERE b.key = c.key
    RETURNING b.key, c.was
),
kept AS (
    INSERT INTO attempts (task_seq, attempt, started_at, finished_at, status_code, error, response, stale)
    SELECT r.task_seq, r.attempt, r.started_at, r.finished_at, r.status_code, r.error, r.response,
           -- by lease, not by task: a batch may hold a stale result and the current one of
           -- the same task (the reaper gave it to a second claim meanwhile)
           NOT EXISTS (SELECT 1 FROM updated u WHERE u.seq = r.task_seq AND u.lease_token = r.lease_token)
    FROM r
    WHERE r.sent AND EXISTS (SELECT 1 FROM tasks t WHERE t.seq = r.task_seq)
),
-- Committed without waiting for the WAL flush, as the claim is (see claim_tasks): a result
-- lost to an OS crash means the task is delivered again, which at-least-once allows.
async_commit AS (
    SELECT set_config('synchronous_commit', 'off', true)
)
-- One row, always: how many results were accepted, and the breakers that closed.
SELECT (SELECT count(*) FROM updated)::int AS accepted,
       (SELECT coalesce(array_agg(key), '{}') FROM closed WHERE was = 'open') AS closed_keys
FROM async_commit;

-- name: get_queue
SELECT * FROM queues WHERE name = :name;

-- name: get_queue_for_update
-- NO KEY UPDATE: enqueues (whose foreign key check takes KEY SHARE) need not wait.
SELECT * FROM queues WHERE name = :name FOR NO KEY UPDATE;

-- name: lock_queue_of_task
-- Taken before a retry makes a finished task ready again. In an ordering=key queue that
-- task may become its key's head again; a claim that read the key before this commits
-- must not be able to claim the key's next task as well (claims hold this lock too).
SELECT q.name FROM queues q
WHERE q.name = (SELECT t.queue FROM tasks t WHERE t.id = :id)
FOR NO KEY UPDATE;

-- name: list_queues
-- Not the retired queues of deleted endpoints (lifecycle.sql).
SELECT * FROM queues WHERE NOT retired ORDER BY name;

-- name: count_tasks_of_queue
-- From task_counts (migration 0014): its folded rows and those appended since, added up.
SELECT queue, status, sum(n)::bigint AS n FROM task_counts WHERE queue = :queue GROUP BY queue, status;

-- name: count_tasks
SELECT queue, status, sum(n)::bigint AS n FROM task_counts GROUP BY queue, status;

-- name: put_queue
INSERT INTO queues (name, max_concurrency, rate_limit, max_attempts, min_backoff, max_backoff,
                    timeout, ordering, paused, signing_secret, stop_on, deadline, retention, created_at, updated_at)
VALUES (:name, :max_concurrency, :rate_limit, :max_attempts, :min_backoff, :max_backoff, :timeout, :ordering, :paused, :signing_secret, :stop_on, :deadline, :retention, :now, :now)
ON CONFLICT (name) DO UPDATE
SET max_concurrency = excluded.max_concurrency, rate_limit = excluded.rate_limit,
    max_attempts = excluded.max_attempts, min_backoff = excluded.min_backoff,
    max_backoff = excluded.max_backoff, timeout = excluded.timeout,
    ordering = excluded.ordering, paused = excluded.paused,
    signing_secret = excluded.signing_secret, stop_on = excluded.stop_on,
    deadline = excluded.deadline, retention = excluded.retention, updated_at = excluded.updated_at
RETURNING (xmax = 0) AS created;

-- name: update_queue
UPDATE queues
SET max_concurrency = :max_concurrency, rate_limit = :rate_limit, max_attempts = :max_attempts, min_backoff = :min_backoff, max_backoff = :max_backoff,
    timeout = :timeout, ordering = :ordering, paused = :paused, signing_secret = :signing_secret, stop_on = :stop_on,
    deadline = :deadline, retention = :retention, updated_at = :now
WHERE name = :name;

-- name: delete_queue
DELETE FROM queues WHERE name = :name RETURNING name;

-- name: delete_queue_releases
-- Its own statement, after delete_queue: the cascade has waited for every result batch
-- that held one of the queue's tasks, so this snapshot sees all the releases they made.
-- (queue_releases has no foreign key: its insert would lock the queue row from inside
-- record_results, and deadlock with a DELETE of that queue waiting for the task rows.)
DELETE FROM queue_releases WHERE queue = :queue;

-- name: purge_queue
WITH purged AS (DELETE FROM tasks WHERE queue = :queue AND status = 'ready' RETURNING 1)
SELECT count(*) FROM purged;

-- name: ping
SELECT 1;

-- name: announce_work
-- Its own statement after the enqueue committed: a NOTIFY inside the enqueue's
-- transaction would take a database-wide lock through that commit (seed 002).
-- :payload is "<kind>:<process id>": work, hello or bye (see postgres/notifier.py);
-- :channel is the schema's (two installs in one database do not wake each other).
SELECT pg_notify(:channel, :payload);

-- name: take_sql_arrivals
-- Tasks enqueued by the SQL functions announce themselves with a row here, which becomes
-- visible when (and only if) the application's transaction commits: a NOTIFY in that
-- transaction would serialize the application's commits (docs/sql-enqueue.md). Whoever
-- deletes the rows wakes its dispatcher and tells the other processes. At most 10,000 at a
-- time: a backlog left by a long outage is taken over several looks, each one short. Each
-- row of enqueue_task names its task's queue (counted in workly_tasks_enqueued_total), each
-- of publish_event none.
WITH taken AS (
    DELETE FROM sql_arrivals WHERE ctid = ANY (ARRAY(SELECT ctid FROM sql_arrivals LIMIT 10000))
    RETURNING queue
)
SELECT queue, count(*)::int AS n FROM taken GROUP BY queue;

-- name: sql_arrivals_used
-- Whether the SQL functions have enqueued in this database (since its statistics were last
-- reset): until they have, a process looks for arrivals only now and then.
SELECT coalesce((SELECT n_tup_ins > 0 FROM pg_stat_user_tables WHERE relid = to_regclass('sql_arrivals')), false);

-- name: set_sql_limits
UPDATE sql_limits SET max_body_bytes = :max_body_bytes WHERE max_body_bytes <> :max_body_bytes;

-- name: schema_exists
SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = :name);

-- name: earlier_install_elsewhere
-- Before WORKLY_DATABASE_SCHEMA, Workly's tables went where the connecting role's search_path
-- put them (its "$user" schema, a search_path set for the role, the database, the server or
-- in the URL). When public holds no install and no schema was configured: a schema that
-- holds one, or none.
SELECT n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relname = 'schema_version' AND c.relkind = 'r' AND n.nspname <> 'public'
  AND to_regclass('public.schema_version') IS NULL
  AND EXISTS (SELECT 1 FROM pg_class t WHERE t.relnamespace = n.oid AND t.relname = 'tasks')
  AND EXISTS (SELECT 1 FROM pg_class q WHERE q.relnamespace = n.oid AND q.relname = 'queues')
  AND EXISTS (SELECT 1 FROM pg_class r WHERE r.relnamespace = n.oid AND r.relname = 'queue_releases')
  AND EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = 'version')
ORDER BY n.nspname
LIMIT 1;

-- name: create_schema_version
CREATE TABLE IF NOT EXISTS schema_version (
    version    integer PRIMARY KEY,
    applied_at timestamptz NOT NULL DEFAULT now()
);

-- name: lock_migrations
-- Several processes may start at once (workly serve --workers N): one migrates.
SELECT pg_advisory_xact_lock(7337001);

-- name: schema_version_exists
SELECT to_regclass('schema_version') IS NOT NULL AS found;

-- name: get_schema_version
SELECT coalesce(max(version), 0) AS version FROM schema_version;

-- name: set_schema_version
INSERT INTO schema_version (version) VALUES (:version);

-- name: get_schema_repeatables
-- The repeatable files run, and the revision and content run (storage/migrator.py).
SELECT name, revision, sha256 FROM schema_repeatables;

-- name: set_schema_repeatable
INSERT INTO schema_repeatables (name, revision, sha256) VALUES (:name, :revision, :sha256)
ON CONFLICT (name) DO UPDATE
SET revision = excluded.revision, sha256 = excluded.sha256, applied_at = excluded.applied_at;

-- name: definitions_owned_by_others
-- Of the :functions and :views the repeatable files define in Workly's schema, those the
-- connected role may not replace: CREATE OR REPLACE needs their owner, or a role whose
-- privileges it inherits. Other objects in the schema (an extension's, an application's) are
-- not Workly's concern.
SELECT format('function %I.%I(%s)', n.nspname, p.proname, pg_get_function_identity_arguments(p.oid)) AS name,
       pg_get_userbyid(p.proowner) AS owner
FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
WHERE n.nspname = :schema AND p.proname = ANY(:functions::text[])
  AND NOT pg_has_role(current_user, p.proowner, 'USAGE')
UNION ALL
SELECT format('view %I.%I', n.nspname, c.relname), pg_get_userbyid(c.relowner)
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = :schema AND c.relname = ANY(:views::text[])
  AND NOT pg_has_role(current_user, c.relowner, 'USAGE')
ORDER BY 1;

-- name: database_now
SELECT clock_timestamp() AS now;

-- name: autovacuum_enabled
SELECT current_setting('autovacuum')::boolean AS enabled;

-- name: bloated_indexes
-- The indexes of the churning tables that are much larger than their entries need, largest
-- first (postgres/indexes.py says why they grow). What the entries need: as many as the
-- index had at its last vacuum (reltuples), each its key's average width (the planner's
-- statistics) plus an 8-byte header, aligned to 8, and a 4-byte line pointer, on 8 kB pages
-- filled to B-tree's 90 %, and two pages any B-tree has (its metapage and root). Too large:
-- more than :factor times that plus :slack_bytes.
WITH sized AS (
    SELECT ci.relname AS name, pg_relation_size(i.indexrelid) AS bytes,
           greatest(ci.reltuples, 0) * (
               ((8 + coalesce((SELECT sum(s.avg_width) FROM pg_attribute a
                               JOIN pg_stats s ON s.schemaname = n.nspname AND s.tablename = c.relname
                                               AND s.attname = a.attname
                               WHERE a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)), 16) + 7) / 8) * 8
               + 4) / (8192 * 0.9) * 8192 + 2 * 8192 AS needed
    FROM pg_index i
    JOIN pg_class ci ON ci.oid = i.indexrelid
    JOIN pg_class c ON c.oid = i.indrelid
    JOIN pg_namespace n ON n.oid = c.relnamespace
    -- Partial indexes of long-lived rows too (idempotency keys, events: they bloat as the full
    -- ones do; reltuples is the index's own count). Not those whose rows live for a state (the
    -- claim's, the leases', held, callbacks due): their size is the traffic between vacuums,
    -- not their entries, and a rebuild (two scans of the table, vacuum kept off it meanwhile)
    -- would buy nothing; nor tasks_succeeded, which retention empties page by page in order.
    WHERE n.nspname = current_schema() AND c.relname IN ('tasks', 'attempts', 'events') AND i.indisvalid
      AND (i.indpred IS NULL
           OR pg_get_expr(i.indpred, i.indrelid) !~ '\m(status|callback_due|held_run_at)\M')
)
SELECT name, bytes, needed::bigint AS needed
FROM sized
WHERE bytes > :factor * needed + :slack_bytes
ORDER BY bytes DESC;

-- name: cancel_index_rebuilds
-- Before a migration changes the tables: a rebuild's lock would hold its DDL, and all
-- traffic behind that. :application is the name postgres/indexes.py gives its connection.
SELECT pg_cancel_backend(pid) FROM pg_stat_activity
WHERE datname = current_database() AND application_name = :application AND pid <> pg_backend_pid();

-- name: index_leftovers
-- What a REINDEX CONCURRENTLY interrupted (a restart, a cancel) leaves behind: an invalid
-- copy named <index>_ccnew (or _ccold), which costs every write and serves no read.
SELECT ci.relname AS name
FROM pg_index i
JOIN pg_class ci ON ci.oid = i.indexrelid
JOIN pg_class c ON c.oid = i.indrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = current_schema() AND c.relname IN ('tasks', 'attempts', 'events')
  AND NOT i.indisvalid AND ci.relname ~ '_cc(new|old)[0-9]*$';

-- name: vacuum
-- SKIP_LOCKED: with several processes, whoever is first vacuums and the rest skip.
VACUUM (SKIP_LOCKED) tasks, attempts, queues, breakers, events, endpoints, sql_arrivals, task_counts;

-- name: reap_expired
-- :limit is the batch size. Running tasks whose lease expired (their process died or
-- stalled) return to ready, due now, or fail when that attempt was their last; each
-- gets an attempt row saying so (the claim set updated_at, so it marks the start). A
-- result that later arrives under the old lease is refused by record_results' fence.
-- SKIP LOCKED: reapers in several processes split the work instead of waiting.
WITH expired AS (
    SELECT seq, updated_at AS claimed_at
    FROM tasks
    WHERE status = 'running' AND lease_expires_at < :now
    ORDER BY lease_expires_at
    LIMIT :limit
    FOR UPDATE SKIP LOCKED
),
reaped AS (
    UPDATE tasks t
    SET status = CASE WHEN e.last THEN 'failed' ELSE 'ready' END,
        -- Back to ready behind an open breaker (not as its probe): held, as enqueue_tasks holds.
        run_at = CASE WHEN NOT e.last AND e.held THEN :held_until::timestamptz ELSE :now::timestamptz END,
        held_run_at = CASE WHEN NOT e.last AND e.held THEN :now::timestamptz END,
        last_status_code = NULL,
        last_error = 'lease expired: no result from the process that claimed it',
        lease_token = NULL,
        lease_expires_at = NULL,
        callback_due = CASE WHEN e.last THEN t.failure_callback_url IS NOT NULL ELSE t.callback_due END,
        callback_seq = CASE WHEN e.last AND t.failure_callback_url IS NOT NULL
                            THEN t.callback_seq + 1 ELSE t.callback_seq END,
        updated_at = :now
    FROM (
        SELECT x.seq, x.claimed_at,
               t2.attempts - t2.attempt_base >= coalesce(t2.max_attempts, q.max_attempts) AS last,
               EXISTS (SELECT 1 FROM breakers b WHERE b.key = t2.breaker AND b.position = 'open'
                       AND b.probe_seq IS DISTINCT FROM t2.seq) AS held
        FROM expired x JOIN tasks t2 ON t2.seq = x.seq JOIN queues q ON q.name = t2.queue
    ) e
    WHERE t.seq = e.seq
    RETURNING t.seq, t.queue, t.attempts, t.last_error
),
released AS (
    INSERT INTO queue_releases (queue, n)
    SELECT queue, count(*) FROM reaped GROUP BY queue
)
INSERT INTO attempts (task_seq, attempt, started_at, finished_at, status_code, error, response, stale)
SELECT r.seq, r.attempts, e.claimed_at, :now, NULL, r.last_error, '', false
FROM reaped r JOIN expired e ON e.seq = r.seq
RETURNING task_seq;

-- name: lock_queues
-- The first statement of recount_running: every queue row, in name order, as claims do.
SELECT name FROM queues ORDER BY name FOR NO KEY UPDATE;

-- name: recount_running
-- The second statement, in a snapshot taken after the lock: with claims held off, the
-- counter becomes the running tasks plus the releases not yet folded in. Both are read
-- in one snapshot, so a result committing meanwhile (one task fewer running, one more
-- release) keeps "counter - releases = running" true. Repairs a counter that drifted,
-- e.g. while processes of an older version ran next to this one.
UPDATE queues q
SET running = c.running
FROM (
    SELECT q2.name,
           (SELECT count(*) FROM tasks t WHERE t.queue = q2.name AND t.status = 'running')
           + (SELECT coalesce(sum(r.n), 0) FROM queue_releases r WHERE r.queue = q2.name) AS running
    FROM queues q2
) c
WHERE q.name = c.name AND q.running <> c.running
RETURNING q.name;

-- name: extend_leases
-- The heartbeat: :seqs and :lease_tokens are the (task, lease token) pairs in flight.
-- Only leases still held are extended; a lease the reaper took back stays lost (the fence).
-- SKIP LOCKED, in seq order: it never waits, so it cannot deadlock with the results of the
-- same deliveries (record_results locks them in seq order too, and waits). A task it skips
-- is having its result written or its lease taken back: its lease needs no more time.
-- A lease only moves forward (greatest): an extension that read an earlier :now, and committed
-- after another that read a later one, must not shorten it under the process's deadline
-- (dispatch/leases.py keeps the later of the two).
WITH held AS (
    SELECT t.seq
    FROM tasks t
    JOIN unnest(:seqs::bigint[], :lease_tokens::text[]) AS l(seq, lease_token)
      ON t.seq = l.seq AND t.lease_token = l.lease_token
    WHERE t.status = 'running'
    ORDER BY t.seq
    FOR NO KEY UPDATE OF t SKIP LOCKED
)
UPDATE tasks t
SET lease_expires_at = greatest(
    t.lease_expires_at, :now::timestamptz + make_interval(secs => coalesce(t.timeout, q.timeout) + :lease_margin)
)
FROM held h, queues q
WHERE t.seq = h.seq AND q.name = t.queue
RETURNING t.seq, t.lease_token;

-- name: extend_lease
-- One lease (:seq, :lease_token), extended as extend_leases extends it, waiting for the row
-- when a heartbeat or a result holds it (one row: no lock order to keep). Behind a result
-- that committed, the row is re-read and no longer running: not extended.
UPDATE tasks t
SET lease_expires_at = greatest(
    t.lease_expires_at, :now::timestamptz + make_interval(secs => coalesce(t.timeout, q.timeout) + :lease_margin)
)
FROM queues q
WHERE t.seq = :seq AND t.lease_token = :lease_token AND t.status = 'running' AND q.name = t.queue
RETURNING t.seq;
