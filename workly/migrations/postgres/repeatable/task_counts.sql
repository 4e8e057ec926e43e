-- revision: 1
-- A repeatable file (workly/storage/migrator.py): a function is changed here, not in a
-- numbered migration, and the revision above is raised by one with each change (a test holds
-- each revision's content). CREATE OR REPLACE keeps each function's owner and what was granted
-- on it; the REVOKEs from PUBLIC are the same each time. It cannot change a function's
-- arguments or result type: a function with other arguments is another function. That takes
-- a numbered migration that creates the new signature as a stub (the repeatable files run
-- after the numbered migrations, so the new function must exist when the migration grants on
-- it), grants on it what pg_proc.proacl held for the old one, and drops the old signature
-- (never with CASCADE); this file then gives the new one its body.

-- The task counts' trigger functions (migration 0014 made them, with the triggers that call
-- them and the count they start from; its comment says why per statement).
CREATE OR REPLACE FUNCTION @schema@.workly_count_inserted_tasks() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    INSERT INTO @schema@.task_counts (queue, status, n)
    SELECT queue, status, count(*) FROM new_tasks GROUP BY queue, status;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION @schema@.workly_count_updated_tasks() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    INSERT INTO @schema@.task_counts (queue, status, n)
    SELECT queue, status, sum(n)
    FROM (SELECT queue, status, 1 AS n FROM new_tasks
          UNION ALL
          SELECT queue, status, -1 FROM old_tasks) AS moved
    GROUP BY queue, status
    HAVING sum(n) <> 0;  -- a lease extended, an attempt counted: no row
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION @schema@.workly_count_deleted_tasks() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    INSERT INTO @schema@.task_counts (queue, status, n)
    SELECT queue, status, -count(*) FROM old_tasks GROUP BY queue, status;
    RETURN NULL;
END
$$;

-- TRUNCATE, not DELETE: a DELETE would miss the row a fold in progress inserts (it commits
-- after this statement's snapshot), and keep counts of tasks that are gone. When the
-- statement truncates task_counts too, it already has (the triggers run after it).
CREATE OR REPLACE FUNCTION @schema@.workly_count_no_tasks() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    BEGIN
        TRUNCATE @schema@.task_counts;
    EXCEPTION WHEN object_in_use THEN
        -- "being used": the statement truncates task_counts too (then this deletes nothing),
        -- or this session reads it in an open cursor.
        DELETE FROM @schema@.task_counts;
    END;
    RETURN NULL;
END
$$;

-- Only triggers call them (a trigger does not need EXECUTE at run time): nobody else may.
REVOKE EXECUTE ON FUNCTION @schema@.workly_count_inserted_tasks(), @schema@.workly_count_updated_tasks(),
    @schema@.workly_count_deleted_tasks(), @schema@.workly_count_no_tasks() FROM PUBLIC;
