-- revision: 6
-- A repeatable file (workly/storage/migrator.py): a function is changed here, not in a
-- numbered migration, and the revision above is raised by one with each change (a test holds
-- each revision's content). CREATE OR REPLACE keeps each function's owner and what was granted
-- on it; the REVOKEs from PUBLIC are the same each time. It cannot change a function's
-- arguments or result type: a function with other arguments is another function. That takes
-- a numbered migration that creates the new signature as a stub (the repeatable files run
-- after the numbered migrations, so the new function must exist when the migration grants on
-- it), grants on it what pg_proc.proacl held for the old one, and drops the old signature
-- (never with CASCADE); this file then gives the new one its body.

-- Enqueue from SQL (docs/sql-enqueue.md; migration 0011 made them, and its comment says how
-- they are kept safe): enqueue_task and publish_event (SECURITY DEFINER), each with its
-- search_path fixed and every Workly object named with @schema@, checking their arguments
-- with the helpers of enqueue_checks.sql. A task field settable from SQL is an argument of
-- enqueue_task (a new signature: see above) and a column of its INSERT. The administrators'
-- GRANT EXECUTE on these two (docs/sql-enqueue.md) stays through every run.
CREATE OR REPLACE FUNCTION @schema@.enqueue_task(
    queue text,
    url text DEFAULT NULL,  -- required, but refused by name (22023) rather than by signature
    method text DEFAULT 'POST',
    headers jsonb DEFAULT '{}',
    body jsonb DEFAULT NULL,
    body_base64 text DEFAULT NULL,
    delay double precision DEFAULT NULL,
    run_at timestamptz DEFAULT NULL,
    priority bigint DEFAULT 0,
    key text DEFAULT NULL,
    tenant text DEFAULT NULL,
    idempotency_key text DEFAULT NULL,
    max_attempts bigint DEFAULT NULL,
    timeout double precision DEFAULT NULL,
    stop_on text[] DEFAULT NULL,
    deadline double precision DEFAULT NULL,
    min_backoff double precision DEFAULT NULL,
    max_backoff double precision DEFAULT NULL,
    callback_url text DEFAULT NULL,
    failure_callback_url text DEFAULT NULL
) RETURNS text
LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp SET standard_conforming_strings = on AS $$
DECLARE
    now_ timestamptz := clock_timestamp();
    origin text;
    encoded record;
    due timestamptz;
    stop_on_text text;
    held boolean;
    task_id text;
BEGIN
    IF queue IS NULL THEN
        PERFORM @schema@.workly_refuse('queue', 'is required');
    END IF;
    IF queue !~ '^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$' THEN
        PERFORM @schema@.workly_refuse('queue', 'must be 1-128 letters, digits, dots, dashes and underscores, '
                                       'starting with a letter or digit');
    END IF;
    IF left(queue, 3) = 'ep_' THEN
        PERFORM @schema@.workly_refuse('queue', 'queue names starting with ''ep_'' are reserved for endpoints');
    END IF;
    IF left(queue, 7) = 'workly.' THEN  -- workly/reserved_names.py
        PERFORM @schema@.workly_refuse('queue', 'queue names starting with ''workly.'' are Workly''s own');
    END IF;
    origin := @schema@.workly_check_url('url', url);
    IF method IS NULL OR method NOT IN ('GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS') THEN
        PERFORM @schema@.workly_refuse('method', 'must be one of GET, POST, PUT, PATCH, DELETE, HEAD, OPTIONS');
    END IF;
    PERFORM @schema@.workly_check_headers(headers);
    due := @schema@.workly_due_at(now_, delay, run_at);
    IF priority IS NULL OR priority NOT BETWEEN -1000000 AND 1000000 THEN
        PERFORM @schema@.workly_refuse('priority', 'must be -1000000 to 1000000');
    END IF;
    IF key IS NOT NULL OR tenant IS NOT NULL OR idempotency_key IS NOT NULL THEN
        PERFORM @schema@.workly_check_keys(key, tenant, idempotency_key);
    END IF;
    IF max_attempts IS NOT NULL AND max_attempts NOT BETWEEN 1 AND 1000 THEN
        PERFORM @schema@.workly_refuse('max_attempts', 'must be 1 to 1000');
    END IF;
    IF timeout IS NOT NULL THEN
        PERFORM @schema@.workly_check_range('timeout'::text, timeout, 0::float8, (3600)::float8, false);
    END IF;
    IF stop_on IS NOT NULL THEN
        stop_on_text := @schema@.workly_stop_on(stop_on);
    END IF;
    IF deadline IS NOT NULL THEN
        PERFORM @schema@.workly_check_range('deadline'::text, deadline, 0::float8, (366 * 86400)::float8, false);
    END IF;
    IF min_backoff IS NOT NULL THEN
        PERFORM @schema@.workly_check_range('min_backoff'::text, min_backoff, 0::float8, (86400)::float8, true);
    END IF;
    IF max_backoff IS NOT NULL THEN
        PERFORM @schema@.workly_check_range('max_backoff'::text, max_backoff, 0::float8, (30 * 86400)::float8, true);
    END IF;
    IF min_backoff > max_backoff THEN
        PERFORM @schema@.workly_refuse('min_backoff', format('min_backoff (%ss) must not exceed max_backoff (%ss)', min_backoff, max_backoff));
    END IF;
    IF callback_url IS NOT NULL OR failure_callback_url IS NOT NULL THEN
        PERFORM @schema@.workly_check_callbacks(callback_url, failure_callback_url);
    END IF;
    encoded := @schema@.workly_encode_body(headers, body, body_base64);
    PERFORM @schema@.workly_check_body_size('body', encoded.bytes);

    -- As enqueue_tasks (storage/sql/postgres.sql): create the queue if missing, hold the
    -- task while its origin's breaker is open, skip a taken idempotency key.
    IF NOT EXISTS (SELECT 1 FROM @schema@.queues q WHERE q.name = enqueue_task.queue) THEN
        INSERT INTO @schema@.queues (name, created_at, updated_at) VALUES (enqueue_task.queue, now_, now_)
        ON CONFLICT DO NOTHING;
    END IF;
    held := EXISTS (SELECT 1 FROM @schema@.breakers b WHERE b.key = origin AND b.position = 'open');
    FOR attempt IN 1..3 LOOP
        INSERT INTO @schema@.tasks (id, queue, status, url, method, headers, body, run_at, held_run_at, priority,
                           key, tenant, idempotency_key, max_attempts, timeout, created_at, updated_at,
                           breaker, stop_on, deadline, min_backoff, max_backoff, callback_url,
                           failure_callback_url)
        VALUES (@schema@.workly_new_id('task'), enqueue_task.queue, 'ready', enqueue_task.url, enqueue_task.method,
                encoded.headers::json, encoded.bytes,
                CASE WHEN held THEN '9999-01-01T00:00:00Z' ELSE due END, CASE WHEN held THEN due END,
                enqueue_task.priority, enqueue_task.key, enqueue_task.tenant, enqueue_task.idempotency_key,
                enqueue_task.max_attempts, enqueue_task.timeout, now_, now_, origin, stop_on_text,
                enqueue_task.deadline, enqueue_task.min_backoff, enqueue_task.max_backoff,
                enqueue_task.callback_url, enqueue_task.failure_callback_url)
        ON CONFLICT DO NOTHING
        RETURNING id INTO task_id;
        IF task_id IS NOT NULL THEN
            INSERT INTO @schema@.sql_arrivals (queue) VALUES (enqueue_task.queue);
            RETURN task_id;
        END IF;
        -- The key is taken: the task that holds it (unless it was deleted since; then again).
        SELECT t.id INTO task_id FROM @schema@.tasks t
        WHERE t.queue = enqueue_task.queue AND t.idempotency_key = enqueue_task.idempotency_key;
        IF task_id IS NOT NULL THEN
            RETURN task_id;
        END IF;
    END LOOP;
    RAISE EXCEPTION 'idempotency key % of queue % is taken, and its task cannot be read', idempotency_key, queue
        USING ERRCODE = '40001';
END
$$;

-- The event and one task per enabled endpoint of its tenant that takes it (subscribed to its
-- type, and its filter holding), as publish_event (storage/postgres/sql/webhooks.sql) stores
-- them; the event's id. WORKLY_EVENT_TYPES=strict (the settings row the service writes)
-- refuses a type the catalogue lacks; payload schemas are the API's alone (docs/webhooks.md).
CREATE OR REPLACE FUNCTION @schema@.publish_event(
    type text DEFAULT NULL,  -- required, but refused by name (22023) rather than by signature
    payload jsonb DEFAULT NULL,
    payload_base64 text DEFAULT NULL,
    tenant text DEFAULT NULL,
    key text DEFAULT NULL,
    idempotency_key text DEFAULT NULL,
    delay double precision DEFAULT NULL,
    run_at timestamptz DEFAULT NULL,
    callback_url text DEFAULT NULL,
    failure_callback_url text DEFAULT NULL,
    labels jsonb DEFAULT NULL
) RETURNS text
LANGUAGE plpgsql SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp SET standard_conforming_strings = on AS $$
DECLARE
    now_ timestamptz := clock_timestamp();
    due timestamptz;
    bytes bytea;
    content_type text;
    event_id text;
    delivered integer;
    document jsonb;
    enveloped bytea;
BEGIN
    IF type IS NULL THEN
        PERFORM @schema@.workly_refuse('type', 'is required');
    END IF;
    IF char_length(type) > 128 OR type !~ '^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$' THEN
        PERFORM @schema@.workly_refuse('type', 'must be dot-separated words of letters, digits, _ and - '
                                      '(at most 128 characters), such as invoice.paid');
    END IF;
    IF left(type, 7) = 'workly.' THEN
        PERFORM @schema@.workly_refuse('type', 'event types starting with ''workly.'' are Workly''s own; choose another prefix');
    END IF;
    IF (SELECT s.value FROM @schema@.settings s WHERE s.name = 'event_types') = 'strict'
       AND NOT EXISTS (SELECT 1 FROM @schema@.event_types et WHERE et.type = publish_event.type) THEN
        PERFORM @schema@.workly_refuse('type', format('%s is not in the event catalogue, and WORKLY_EVENT_TYPES=strict '
                                                      'publishes only catalogue types: declare it first '
                                                      '(PUT /v1/event-types/%s)', to_json(type), type));
    END IF;
    IF labels IS NOT NULL THEN
        PERFORM @schema@.workly_check_labels(labels);
        labels := nullif(labels, '{}'::jsonb);
    END IF;
    IF payload IS NOT NULL AND payload_base64 IS NOT NULL THEN
        PERFORM @schema@.workly_refuse('payload', 'give either payload or payload_base64, not both');
    END IF;
    IF payload IS NULL AND payload_base64 IS NULL THEN
        PERFORM @schema@.workly_refuse('payload', 'give payload (any JSON) or payload_base64');
    END IF;
    IF key IS NOT NULL OR tenant IS NOT NULL OR idempotency_key IS NOT NULL THEN
        PERFORM @schema@.workly_check_keys(key, tenant, idempotency_key);
    END IF;
    due := @schema@.workly_due_at(now_, delay, run_at);
    IF callback_url IS NOT NULL OR failure_callback_url IS NOT NULL THEN
        PERFORM @schema@.workly_check_callbacks(callback_url, failure_callback_url);
    END IF;
    IF payload_base64 IS NOT NULL THEN
        bytes := @schema@.workly_base64('payload_base64', payload_base64);
        content_type := 'application/octet-stream';
    ELSE
        bytes := convert_to(payload::text, 'UTF8');
        content_type := 'application/json';
    END IF;
    PERFORM @schema@.workly_check_body_size('payload', bytes);
    -- What endpoint filters read (workly/event_filter.py's filter_document), and the
    -- envelope (workly/webhooks.py's envelope): the same bytes the API makes.
    document := jsonb_build_object('type', type, 'tenant', tenant, 'labels', coalesce(labels, '{}'::jsonb));
    IF content_type = 'application/json' THEN
        document := document || jsonb_build_object('payload', payload);
    END IF;
    enveloped := convert_to('{"type":' || to_json(type)::text || ',"timestamp":'
                            || to_json(to_char(now_ AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'))::text
                            || CASE WHEN content_type = 'application/json' THEN ',"data":'
                                    ELSE ',"data_base64":"' || replace(encode(bytes, 'base64'), E'\n', '') || '"}'
                               END, 'UTF8');
    IF content_type = 'application/json' THEN
        enveloped := enveloped || bytes || '\x7d'::bytea;
    END IF;

    FOR attempt IN 1..3 LOOP
        INSERT INTO @schema@.events (id, type, tenant, key, idempotency_key, payload, content_type, run_at, created_at,
                            callback_url, failure_callback_url, labels)
        VALUES (@schema@.workly_new_id('evt'), publish_event.type, publish_event.tenant, publish_event.key,
                publish_event.idempotency_key, bytes, content_type, due, now_, publish_event.callback_url,
                publish_event.failure_callback_url, publish_event.labels)
        ON CONFLICT DO NOTHING
        RETURNING id INTO event_id;
        IF event_id IS NOT NULL THEN
            EXIT;
        END IF;
        SELECT e.id INTO event_id FROM @schema@.events e
        WHERE coalesce(e.tenant, '') = coalesce(publish_event.tenant, '')
          AND e.idempotency_key = publish_event.idempotency_key;
        IF event_id IS NOT NULL THEN
            RETURN event_id;  -- published before: nothing new
        END IF;
    END LOOP;
    IF event_id IS NULL THEN
        RAISE EXCEPTION 'idempotency key % is taken, and its event cannot be read', idempotency_key
            USING ERRCODE = '40001';
    END IF;
    IF tenant IS NOT NULL THEN  -- a tenant named for the first time gets its row (docs/tenants.md)
        INSERT INTO @schema@.tenants (tenant, created_at, updated_at) VALUES (publish_event.tenant, now_, now_)
        ON CONFLICT DO NOTHING;
    END IF;

    -- Subscribers (workly/webhooks.py's matches): no types given = every type but
    -- workly.*; an exact type; or 'prefix.*' for every type under prefix. Then the filter,
    -- compiled to an SQL/JSON path beside it (an error in it counts as false, as in Python).
    INSERT INTO @schema@.tasks (id, queue, status, url, method, headers, body, run_at, held_run_at, priority, key,
                       created_at, updated_at, event_id, endpoint_id, breaker, callback_url,
                       failure_callback_url)
    SELECT @schema@.workly_new_id('task'), ep.id, 'ready', ep.url, 'POST',
           CASE WHEN EXISTS (SELECT 1 FROM json_object_keys(ep_headers.object) AS h(name) WHERE lower(h.name COLLATE "C") = 'content-type')
                THEN ep_headers.object
                ELSE (ep_headers.object::jsonb
                      || jsonb_build_object('content-type', CASE WHEN ep.payload_format = 'envelope'
                                                                 THEN 'application/json' ELSE content_type END))::json
           END,
           CASE WHEN ep.payload_format = 'envelope' THEN enveloped ELSE bytes END,
           CASE WHEN b.key IS NULL THEN due ELSE '9999-01-01T00:00:00Z' END,
           CASE WHEN b.key IS NOT NULL THEN due END, 0, publish_event.key, now_, now_, event_id, ep.id, ep.id,
           publish_event.callback_url, publish_event.failure_callback_url
    FROM @schema@.endpoints ep
    CROSS JOIN LATERAL (
        SELECT CASE json_typeof(ep.headers) WHEN 'string' THEN (ep.headers #>> '{}')::json ELSE ep.headers END
    ) AS ep_headers(object)
    LEFT JOIN @schema@.breakers b ON b.key = ep.id AND b.position = 'open'
    WHERE ep.enabled AND ep.tenant IS NOT DISTINCT FROM publish_event.tenant
      AND (CASE WHEN ep.event_types IS NULL THEN left(publish_event.type, 7) <> 'workly.'
                ELSE EXISTS (SELECT 1 FROM unnest(ep.event_types) AS p(pattern)
                             WHERE p.pattern = publish_event.type
                                OR (right(p.pattern, 2) = '.*'
                                    AND left(publish_event.type, char_length(p.pattern) - 1) = left(p.pattern, -1)))
           END)
      AND (ep.filter_path IS NULL OR coalesce(document @@ ep.filter_path, false))
    ORDER BY ep.seq;
    GET DIAGNOSTICS delivered = ROW_COUNT;
    IF delivered > 0 THEN
        INSERT INTO @schema@.sql_arrivals DEFAULT VALUES;
    END IF;
    RETURN event_id;
END
$$;

REVOKE ALL ON FUNCTION @schema@.enqueue_task(text, text, text, jsonb, jsonb, text, double precision, timestamptz, bigint,
                                    text, text, text, bigint, double precision, text[], double precision,
                                    double precision, double precision, text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION @schema@.publish_event(text, jsonb, text, text, text, text, double precision, timestamptz, text,
                                     text, jsonb) FROM PUBLIC;
