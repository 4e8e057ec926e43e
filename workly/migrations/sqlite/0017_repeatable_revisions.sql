-- A repeatable file runs when its revision (its first line) is above the one recorded here,
-- not when its hash differs: during a rolling upgrade, a process of the older version must not
-- put its older definitions back (workly/storage/migrator.py). Every file runs after this
-- migration and records its revision.
ALTER TABLE schema_repeatables ADD COLUMN revision INTEGER NOT NULL DEFAULT 0;
