-- The dashboard's charts (workly/delivery_stats.py): per queue and per endpoint, per minute
-- (its start, microseconds since the epoch), the attempts that succeeded, will be retried
-- and failed for good, and how many took at most 5, 10, 25, 50, 100, 250, 500, 1000, 2500,
-- 5000, 10000 ms (b0..b10) or longer (b11). Each process adds its counts every few seconds;
-- rows older than two hours are deleted.
CREATE TABLE delivery_minutes (
    scope     TEXT NOT NULL CHECK (scope IN ('queue', 'endpoint')),
    name      TEXT NOT NULL,
    minute    INTEGER NOT NULL,
    succeeded INTEGER NOT NULL DEFAULT 0,
    retried   INTEGER NOT NULL DEFAULT 0,
    failed    INTEGER NOT NULL DEFAULT 0,
    b0 INTEGER NOT NULL DEFAULT 0, b1 INTEGER NOT NULL DEFAULT 0, b2 INTEGER NOT NULL DEFAULT 0,
    b3 INTEGER NOT NULL DEFAULT 0, b4 INTEGER NOT NULL DEFAULT 0, b5 INTEGER NOT NULL DEFAULT 0,
    b6 INTEGER NOT NULL DEFAULT 0, b7 INTEGER NOT NULL DEFAULT 0, b8 INTEGER NOT NULL DEFAULT 0,
    b9 INTEGER NOT NULL DEFAULT 0, b10 INTEGER NOT NULL DEFAULT 0, b11 INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (scope, name, minute)
) WITHOUT ROWID;
CREATE INDEX delivery_minutes_minute ON delivery_minutes (minute);
