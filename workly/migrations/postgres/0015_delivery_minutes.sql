-- The dashboard's charts (workly/delivery_stats.py): per queue and per endpoint, per minute,
-- the attempts that succeeded, will be retried and failed for good, and how many took at
-- most 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000 ms (b0..b10) or longer (b11).
-- Each process adds its counts every few seconds; rows older than two hours are deleted.
CREATE TABLE @schema@.delivery_minutes (
    scope     text NOT NULL CHECK (scope IN ('queue', 'endpoint')),
    name      text NOT NULL,
    minute    timestamptz NOT NULL,
    succeeded bigint NOT NULL DEFAULT 0,
    retried   bigint NOT NULL DEFAULT 0,
    failed    bigint NOT NULL DEFAULT 0,
    b0 bigint NOT NULL DEFAULT 0, b1 bigint NOT NULL DEFAULT 0, b2 bigint NOT NULL DEFAULT 0,
    b3 bigint NOT NULL DEFAULT 0, b4 bigint NOT NULL DEFAULT 0, b5 bigint NOT NULL DEFAULT 0,
    b6 bigint NOT NULL DEFAULT 0, b7 bigint NOT NULL DEFAULT 0, b8 bigint NOT NULL DEFAULT 0,
    b9 bigint NOT NULL DEFAULT 0, b10 bigint NOT NULL DEFAULT 0, b11 bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (scope, name, minute)
);
-- Pruning by age reads the oldest minutes, whatever the series.
CREATE INDEX delivery_minutes_minute ON @schema@.delivery_minutes (minute);
