-- The webhook platform (docs/webhooks.md): endpoints, events, and circuit breakers.

-- An endpoint delivers through a queue named after its id, which holds its delivery
-- settings and signing secrets; queues.paused is NOT endpoints.enabled (both are written
-- together). Deleting the endpoint deletes that queue, and with it its tasks.
CREATE TABLE endpoints (
    seq             bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
    id              text PRIMARY KEY REFERENCES queues (name) ON DELETE CASCADE,
    url             text NOT NULL,
    description     text,
    event_types     text[],  -- exact types and 'prefix.*' patterns; NULL: every type
    tenant          text,
    headers         json NOT NULL,
    enabled         boolean NOT NULL DEFAULT true,
    disabled_reason text,
    created_at      timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL
);
-- A publish reads the enabled endpoints of the event's tenant.
CREATE INDEX endpoints_tenant ON endpoints (tenant, seq);

CREATE TABLE events (
    seq             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id              text NOT NULL UNIQUE,
    type            text NOT NULL,
    tenant          text,
    key             text,
    idempotency_key text,
    payload         bytea NOT NULL,
    content_type    text NOT NULL,
    run_at          timestamptz NOT NULL,
    created_at      timestamptz NOT NULL
);
-- An idempotency key is unique per tenant (the untenanted events share one space).
CREATE UNIQUE INDEX events_idempotency ON events (coalesce(tenant, ''), idempotency_key)
    WHERE idempotency_key IS NOT NULL;
CREATE INDEX events_type ON events (type, seq);
CREATE INDEX events_tenant ON events (tenant, seq);

-- One row per receiver that has failed (an endpoint's from its creation): the breaker's
-- state (workly/breaker.py). key: an endpoint id, or a plain task's origin.
CREATE TABLE breakers (
    key                  text PRIMARY KEY,
    position             text NOT NULL DEFAULT 'closed' CHECK (position IN ('closed', 'open')),
    consecutive_failures integer NOT NULL DEFAULT 0,
    failing_since        timestamptz,
    last_success_at      timestamptz,
    probe_at             timestamptz,
    probe_seq            bigint,
    cooldown             double precision
);

-- event_id, endpoint_id: an event's delivery. breaker: the breaker the task counts for.
-- held_run_at: set while its breaker holds the task; run_at is then far in the future so
-- no claim takes it, and held_run_at is what it was.
ALTER TABLE tasks
    ADD COLUMN event_id    text,
    ADD COLUMN endpoint_id text,
    ADD COLUMN breaker     text,
    ADD COLUMN held_run_at timestamptz;
CREATE INDEX tasks_event ON tasks (event_id) WHERE event_id IS NOT NULL;
CREATE INDEX tasks_held ON tasks (breaker) WHERE held_run_at IS NOT NULL;

-- A held task shows the time it was due before its breaker held it.
DROP VIEW task_view;
CREATE VIEW task_view AS
SELECT t.seq, t.id, t.queue, t.status, t.url, t.method, t.headers, t.body,
       coalesce(t.held_run_at, t.run_at) AS run_at, t.priority,
       t.key, t.tenant, t.idempotency_key, t.attempts,
       coalesce(t.max_attempts, q.max_attempts) AS max_attempts,
       coalesce(t.timeout, q.timeout) AS timeout,
       t.last_status_code, t.last_error, t.created_at, t.updated_at, t.event_id, t.endpoint_id
FROM tasks t
JOIN queues q ON q.name = t.queue;
