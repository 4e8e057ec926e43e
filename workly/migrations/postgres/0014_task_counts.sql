-- Tasks per queue and status, kept as they change: GET /v1/queues and the dashboard read
-- this small table instead of counting the tasks table on every request.
--
-- Counting into one row per (queue, status) would make every transaction that moves a task
-- wait for the one before it to commit (they all update the same few rows). So each
-- statement that changes tasks appends its net change instead (a statement-level trigger
-- over its transition tables: one row per queue and status it moved, whatever the number
-- of tasks), and the housekeeper folds the rows into one per queue and status every few
-- seconds (fold_task_counts). A count is the sum of its rows.
CREATE TABLE @schema@.task_counts (
    queue  text NOT NULL,
    status text NOT NULL,
    n      bigint NOT NULL
);

-- Writers wait from here to the migration's commit (reads go on): a task written between the
-- count and the triggers' creation would otherwise be counted by neither.
LOCK TABLE @schema@.tasks IN SHARE ROW EXCLUSIVE MODE;

INSERT INTO @schema@.task_counts (queue, status, n)
SELECT queue, status, count(*) FROM @schema@.tasks GROUP BY queue, status;

CREATE FUNCTION @schema@.workly_count_inserted_tasks() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    INSERT INTO @schema@.task_counts (queue, status, n)
    SELECT queue, status, count(*) FROM new_tasks GROUP BY queue, status;
    RETURN NULL;
END
$$;

CREATE FUNCTION @schema@.workly_count_updated_tasks() RETURNS trigger
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

CREATE FUNCTION @schema@.workly_count_deleted_tasks() RETURNS trigger
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
CREATE FUNCTION @schema@.workly_count_no_tasks() RETURNS trigger
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

CREATE TRIGGER tasks_counted_insert AFTER INSERT ON @schema@.tasks
REFERENCING NEW TABLE AS new_tasks
FOR EACH STATEMENT EXECUTE FUNCTION @schema@.workly_count_inserted_tasks();

CREATE TRIGGER tasks_counted_update AFTER UPDATE ON @schema@.tasks
REFERENCING OLD TABLE AS old_tasks NEW TABLE AS new_tasks
FOR EACH STATEMENT EXECUTE FUNCTION @schema@.workly_count_updated_tasks();

CREATE TRIGGER tasks_counted_delete AFTER DELETE ON @schema@.tasks
REFERENCING OLD TABLE AS old_tasks
FOR EACH STATEMENT EXECUTE FUNCTION @schema@.workly_count_deleted_tasks();

CREATE TRIGGER tasks_counted_truncate AFTER TRUNCATE ON @schema@.tasks
FOR EACH STATEMENT EXECUTE FUNCTION @schema@.workly_count_no_tasks();

-- Only triggers call them (a trigger does not need EXECUTE at run time): nobody else may.
REVOKE EXECUTE ON FUNCTION @schema@.workly_count_inserted_tasks(), @schema@.workly_count_updated_tasks(),
    @schema@.workly_count_deleted_tasks(), @schema@.workly_count_no_tasks() FROM PUBLIC;
