-- A repeatable file runs when its revision (its first line) is above the one recorded here,
-- not when its hash differs: during a rolling upgrade, a process of the older version must not
-- put its older definitions back (workly/storage/migrator.py). Every file runs after this
-- migration and records its revision. The functions were one file until the revisions came,
-- then one per concern: the old file's row goes.
ALTER TABLE @schema@.schema_repeatables ADD COLUMN revision integer NOT NULL DEFAULT 0;
DELETE FROM @schema@.schema_repeatables WHERE name = 'functions';
