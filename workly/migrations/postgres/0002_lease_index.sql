-- The reaper finds running tasks whose lease has expired: a partial index holds only
-- running rows, so its scan is as small as the work in flight.
CREATE INDEX tasks_lease ON tasks (lease_expires_at) WHERE status = 'running';
