-- Data lifecycle (see the PostgreSQL migration).
ALTER TABLE queues ADD COLUMN retention INTEGER;
ALTER TABLE queues ADD COLUMN retired INTEGER NOT NULL DEFAULT 0;

CREATE INDEX tasks_failed ON tasks (updated_at) WHERE status IN ('failed', 'canceled');
CREATE INDEX tasks_tenant ON tasks (tenant, seq) WHERE tenant IS NOT NULL;
CREATE INDEX tasks_callback_of ON tasks (callback_of) WHERE callback_of IS NOT NULL;

-- Operations gain 'erase' and its phase. SQLite cannot change a CHECK: the table is made
-- again, its rows copied (AUTOINCREMENT's counter goes with them).
CREATE TABLE operations_new (
    seq              INTEGER PRIMARY KEY AUTOINCREMENT,
    id               TEXT NOT NULL UNIQUE,
    action           TEXT NOT NULL CHECK (action IN ('retry', 'cancel', 'replay', 'erase')),
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
    finished_at      INTEGER,
    phase            TEXT
);
INSERT INTO operations_new (seq, id, action, filter, state, matched, changed, skipped, after_seq, upto_seq,
                            error, lease_token, lease_expires_at, created_at, updated_at, finished_at)
SELECT seq, id, action, filter, state, matched, changed, skipped, after_seq, upto_seq,
       error, lease_token, lease_expires_at, created_at, updated_at, finished_at
FROM operations;
DROP TABLE operations;
ALTER TABLE operations_new RENAME TO operations;
CREATE INDEX operations_running ON operations (seq) WHERE state = 'running';
