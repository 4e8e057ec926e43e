-- The event catalogue for PostgreSQL (workly/event_types.py, docs/webhooks.md).

-- name: put_event_type
-- Create or replace; a replacement raises the version, so every process recompiles.
INSERT INTO event_types (type, description, schema, examples, deprecated, created_at, updated_at)
VALUES (:type, :description, :schema::json, :examples::json, :deprecated, :now, :now)
ON CONFLICT (type) DO UPDATE
SET description = excluded.description, schema = excluded.schema, examples = excluded.examples,
    deprecated = excluded.deprecated, version = event_types.version + 1, updated_at = excluded.updated_at
RETURNING seq, type, description, schema::text AS schema, examples::text AS examples, deprecated, version, created_at, updated_at,
          (xmax = 0) AS created;

-- name: lock_event_type
SELECT seq, type, description, schema::text AS schema, examples::text AS examples, deprecated, version, created_at, updated_at FROM event_types WHERE type = :type FOR UPDATE;

-- name: update_event_type
UPDATE event_types
SET description = :description, schema = :schema::json, examples = :examples::json,
    deprecated = :deprecated, version = version + 1, updated_at = :now
WHERE type = :type
RETURNING seq, type, description, schema::text AS schema, examples::text AS examples, deprecated, version, created_at, updated_at;

-- name: get_event_type
-- JSON as text (read by catalogue_rows with json, which keeps integers beyond 64 bits exact).
SELECT seq, type, description, schema::text AS schema, examples::text AS examples, deprecated, version, created_at, updated_at FROM event_types WHERE type = :type;

-- name: list_event_types
-- Newest first, as every list; deprecated ones only when asked for.
SELECT seq, type, description, schema::text AS schema, examples::text AS examples, deprecated, version, created_at, updated_at FROM event_types
WHERE seq < :before AND (:include_deprecated::boolean OR NOT deprecated)
ORDER BY seq DESC LIMIT :limit;

-- name: delete_event_type
DELETE FROM event_types WHERE type = :type RETURNING type;

-- name: catalogue_types
-- Every type (the strict mode's check of a subscription reads them).
SELECT type FROM event_types ORDER BY type;

-- name: put_setting
INSERT INTO settings (name, value) VALUES (:name, :value)
ON CONFLICT (name) DO UPDATE SET value = excluded.value;

-- name: get_setting
SELECT value FROM settings WHERE name = :name;
