-- The repeatable files (workly/migrations/postgres/repeatable/*.sql: the functions and
-- task_view) and the SHA-256 of the content last run: workly/storage/migrator.py runs a file
-- again when its content changes, after the numbered migrations, under the same lock.
CREATE TABLE @schema@.schema_repeatables (
    name       text PRIMARY KEY,
    sha256     text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);
