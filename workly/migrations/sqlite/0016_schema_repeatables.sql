-- The repeatable files (workly/migrations/sqlite/repeatable/*.sql: task_view) and the
-- SHA-256 of the content last run: workly/storage/migrator.py runs a file again when its
-- content changes, after the numbered migrations, in the same transaction.
CREATE TABLE schema_repeatables (
    name       TEXT PRIMARY KEY,
    sha256     TEXT NOT NULL,
    applied_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);
