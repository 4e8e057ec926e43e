-- revision: 2
-- The views, as they are now: a repeatable file (workly/storage/migrator.py says when it
-- runs), so a view is changed here, not in a numbered migration, and the revision above is
-- raised by one with each change (a test holds each revision's content).
--
-- task_view: a task as the API shows it, its queue's defaults filled in. A running task shows
-- who holds it and until when: the claim's lease token starts with the claiming process's
-- name (host:pid/…), and task_view shows that part and the lease's end. CREATE OR REPLACE
-- keeps the view (and anything granted on it) but may only append columns: a new column goes
-- last. To drop, rename or reorder one, a numbered migration drops the view (no CASCADE:
-- nothing may silently go with it) and this file then creates it again.
CREATE OR REPLACE VIEW @schema@.task_view AS
SELECT t.seq, t.id, t.queue, t.status, t.url, t.method, t.headers, t.body,
       coalesce(t.held_run_at, t.run_at) AS run_at, t.priority,
       t.key, t.tenant, t.idempotency_key, t.attempts,
       coalesce(t.max_attempts, q.max_attempts) AS max_attempts,
       coalesce(t.timeout, q.timeout) AS timeout,
       t.last_status_code, t.last_error, t.created_at, t.updated_at, t.event_id, t.endpoint_id,
       coalesce(t.stop_on, q.stop_on) AS stop_on, coalesce(t.deadline, q.deadline) AS deadline,
       coalesce(t.min_backoff, q.min_backoff) AS min_backoff,
       coalesce(t.max_backoff, q.max_backoff) AS max_backoff,
       t.callback_url, t.failure_callback_url, t.callback_of,
       CASE WHEN t.status = 'running' AND strpos(t.lease_token, '/') > 0
            THEN split_part(t.lease_token, '/', 1) END AS lease_holder,
       CASE WHEN t.status = 'running' THEN t.lease_expires_at END AS lease_expires_at,
       t.test
FROM @schema@.tasks t
JOIN @schema@.queues q ON q.name = t.queue;
