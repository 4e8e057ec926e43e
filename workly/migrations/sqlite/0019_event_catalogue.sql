-- The event catalogue and routing (docs/webhooks.md; see the PostgreSQL migration). Times
-- are microseconds since the epoch; JSON is kept as text.
CREATE TABLE event_types (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    type        TEXT NOT NULL UNIQUE,
    description TEXT,
    schema      TEXT,
    examples    TEXT NOT NULL DEFAULT '[]',
    deprecated  INTEGER NOT NULL DEFAULT 0,
    version     INTEGER NOT NULL DEFAULT 1,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
);

CREATE TABLE settings (
    name  TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

-- SQLite has no SQL publish: the filter is evaluated by the API's fan-out alone.
ALTER TABLE endpoints ADD COLUMN payload_format TEXT NOT NULL DEFAULT 'raw'
    CHECK (payload_format IN ('raw', 'envelope'));
ALTER TABLE endpoints ADD COLUMN filter TEXT;

ALTER TABLE events ADD COLUMN labels TEXT;

ALTER TABLE tasks ADD COLUMN test INTEGER NOT NULL DEFAULT 0;

-- Bulk operations gain 'replay' (POST /v1/endpoints/{id}/replay). SQLite cannot change a
-- CHECK: the table is made again, its rows copied (AUTOINCREMENT's counter goes with them).
CREATE TABLE operations_new (
    seq              INTEGER PRIMARY KEY AUTOINCREMENT,
    id               TEXT NOT NULL UNIQUE,
    action           TEXT NOT NULL CHECK (action IN ('retry', 'cancel', 'replay')),
    filter           TEXT NOT NULL,
    state            TEXT NOT NULL DEFAULT 'running' CHECK (state IN ('running', 'succeeded', 'failed')),
    matched          INTEGER NOT NULL DEFAULT 0,
    changed          INTEGER NOT NULL DEFAULT 0,
    skipped          INTEGER NOT NULL DEFAULT 0,
    after_seq        INTEGER NOT NULL DEFAULT 0,
    upto_seq         INTEGER NOT NULL,
    error            TEXT,
    lease_token      TEXT,
    lease_expires_at INTEGER,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    finished_at      INTEGER
);
INSERT INTO operations_new SELECT * FROM operations;
DROP TABLE operations;
ALTER TABLE operations_new RENAME TO operations;
CREATE INDEX operations_running ON operations (seq) WHERE state = 'running';
