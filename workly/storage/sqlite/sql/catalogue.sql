-- The event catalogue for SQLite (see postgres/sql/catalogue.sql). JSON is kept as text.

-- name: put_event_type
INSERT INTO event_types (type, description, schema, examples, deprecated, created_at, updated_at)
VALUES (:type, :description, :schema, :examples, :deprecated, :now, :now)
ON CONFLICT (type) DO UPDATE
SET description = excluded.description, schema = excluded.schema, examples = excluded.examples,
    deprecated = excluded.deprecated, version = event_types.version + 1, updated_at = excluded.updated_at
RETURNING *, version = 1 AS created;

-- name: lock_event_type
-- SQLite's writer holds the whole database: reading the row is enough.
SELECT * FROM event_types WHERE type = :type;

-- name: update_event_type
UPDATE event_types
SET description = :description, schema = :schema, examples = :examples,
    deprecated = :deprecated, version = version + 1, updated_at = :now
WHERE type = :type
RETURNING *;

-- name: get_event_type
SELECT * FROM event_types WHERE type = :type;

-- name: list_event_types
-- Newest first, as every list; deprecated ones only when asked for.
SELECT * FROM event_types
WHERE seq < :before AND (:include_deprecated OR NOT deprecated)
ORDER BY seq DESC LIMIT :limit;

-- name: delete_event_type
DELETE FROM event_types WHERE type = :type RETURNING type;

-- name: catalogue_types
SELECT type FROM event_types ORDER BY type;

-- name: put_setting
INSERT INTO settings (name, value) VALUES (:name, :value)
ON CONFLICT (name) DO UPDATE SET value = excluded.value;

-- name: get_setting
SELECT value FROM settings WHERE name = :name;
