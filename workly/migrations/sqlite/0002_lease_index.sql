-- The reaper finds running tasks whose lease has expired (see the Postgres migration).
CREATE INDEX tasks_lease ON tasks (lease_expires_at) WHERE status = 'running';
