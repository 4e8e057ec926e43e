-- Tenants, API keys and the audit log for PostgreSQL (workly/tenants.py, api_keys.py, audit.py).

-- name: ensure_tenant
-- A tenant named by an endpoint or an event gets its row on first use.
INSERT INTO tenants (tenant, created_at, updated_at) VALUES (:tenant, :now, :now)
ON CONFLICT (tenant) DO NOTHING;

-- name: put_tenant
INSERT INTO tenants (tenant, name, metadata, retention, max_endpoints, created_at, updated_at)
VALUES (:tenant, :name, :metadata::json, :retention, :max_endpoints, :now, :now)
ON CONFLICT (tenant) DO UPDATE
SET name = excluded.name, metadata = excluded.metadata, retention = excluded.retention,
    max_endpoints = excluded.max_endpoints, updated_at = excluded.updated_at
RETURNING (xmax = 0) AS created;

-- name: update_tenant
UPDATE tenants
SET name = :name, metadata = :metadata::json, retention = :retention, max_endpoints = :max_endpoints,
    updated_at = :now
WHERE tenant = :tenant;

-- name: get_tenant
SELECT t.*, (SELECT count(*) FROM endpoints e WHERE e.tenant = t.tenant)::int AS endpoints
FROM tenants t WHERE t.tenant = :tenant;

-- name: lock_tenant
-- Taken before an endpoint is added to the tenant: two creations cannot both pass its
-- limit. (The endpoints are counted by the next statement, which sees what the
-- transaction that held the lock before committed; this one's snapshot would not.)
SELECT * FROM tenants WHERE tenant = :tenant FOR UPDATE;

-- name: count_tenant_endpoints
SELECT count(*)::int AS endpoints FROM endpoints WHERE tenant = :tenant;

-- name: list_tenants
SELECT t.*, (SELECT count(*) FROM endpoints e WHERE e.tenant = t.tenant)::int AS endpoints
FROM tenants t WHERE t.seq < :before ORDER BY t.seq DESC LIMIT :limit;

-- name: insert_key
INSERT INTO api_keys (id, digest, name, role, tenant, expires_at, created_at)
VALUES (:id, :digest, :name, :role, :tenant, :expires_at, :now)
RETURNING *;

-- name: get_key
SELECT * FROM api_keys WHERE id = :id;

-- name: key_by_digest
SELECT * FROM api_keys WHERE digest = :digest;

-- name: list_keys
SELECT * FROM api_keys WHERE seq < :before ORDER BY seq DESC LIMIT :limit;

-- name: revoke_key
UPDATE api_keys SET revoked_at = coalesce(revoked_at, :now) WHERE id = :id RETURNING *;

-- name: touch_key
UPDATE api_keys SET last_used_at = :now WHERE id = :id AND (last_used_at IS NULL OR last_used_at < :now);

-- name: insert_audit
INSERT INTO audit_log (id, at, actor, actor_key, action, target, tenant, outcome, status, source_ip,
                       user_agent, changes)
VALUES (:id, :at, :actor::json, :actor_key, :action, :target, :tenant, :outcome, :status, :source_ip,
        :user_agent, :changes::json);

-- name: list_audit
SELECT * FROM audit_log
WHERE seq < :before
  AND (:actor::text IS NULL OR actor_key = :actor)
  AND (:action::text IS NULL OR action = :action)
  AND (:tenant::text IS NULL OR tenant = :tenant)
  AND (:since::timestamptz IS NULL OR at >= :since)
  AND (:until::timestamptz IS NULL OR at < :until)
ORDER BY seq DESC LIMIT :limit;

-- name: prune_audit
DELETE FROM audit_log WHERE seq IN (
    SELECT seq FROM audit_log WHERE at < :cutoff ORDER BY at LIMIT :limit
) RETURNING seq;

-- name: insert_session
INSERT INTO sessions (id, digest, key_id, token_mac, created_at, expires_at)
VALUES (:id, :digest, :key_id, :token_mac, :created_at, :expires_at)
RETURNING *;

-- name: session_by_digest
SELECT * FROM sessions WHERE digest = :digest;

-- name: end_session
UPDATE sessions SET ended_at = coalesce(ended_at, :now) WHERE digest = :digest RETURNING id;

-- name: prune_sessions
-- Sessions expired or ended a day ago: nothing opens with them any more.
DELETE FROM sessions WHERE seq IN (
    SELECT seq FROM sessions WHERE expires_at < :cutoff OR ended_at < :cutoff ORDER BY seq LIMIT :limit
) RETURNING seq;
