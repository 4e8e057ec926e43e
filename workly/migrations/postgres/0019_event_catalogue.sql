-- The event catalogue and routing (docs/webhooks.md): event types with their JSON Schema,
-- endpoint payload formats and content filters, event labels, test deliveries.
--
-- event_types: one row per declared type; version rises with every change, so each process
-- knows when the validator it compiled is out of date.
CREATE TABLE event_types (
    seq         bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
    type        text PRIMARY KEY,
    description text,
    schema      json,  -- json, not jsonb: kept as given (key order, as the client wrote it)
    examples    json NOT NULL DEFAULT '[]',
    deprecated  boolean NOT NULL DEFAULT false,
    version     integer NOT NULL DEFAULT 1,
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL
);

-- settings: what every process and the SQL functions must agree on; the service writes its
-- WORKLY_EVENT_TYPES here when it starts, and publish_event reads it.
CREATE TABLE settings (
    name  text PRIMARY KEY,
    value text NOT NULL
);

-- filter: the endpoint's content filter as given (JSON text); filter_path: the same filter
-- compiled to an SQL/JSON path (workly/event_filter.py), which publish_event evaluates.
ALTER TABLE endpoints
    ADD COLUMN payload_format text NOT NULL DEFAULT 'raw' CHECK (payload_format IN ('raw', 'envelope')),
    ADD COLUMN filter text,
    ADD COLUMN filter_path jsonpath;

ALTER TABLE events ADD COLUMN labels jsonb;

-- A test delivery (POST /v1/endpoints/{id}/test) is a task like any other, marked.
ALTER TABLE tasks ADD COLUMN test boolean NOT NULL DEFAULT false;

-- publish_event gains labels: a function with other arguments is another function, so the
-- new one is made here as a stub (repeatable/enqueue_functions.sql gives it its body), is
-- granted what was granted on the old one, and the old one goes.
CREATE FUNCTION @schema@.publish_event(
    type text DEFAULT NULL,
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
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    RAISE EXCEPTION 'publish_event is being migrated';
END
$$;
REVOKE ALL ON FUNCTION @schema@.publish_event(text, jsonb, text, text, text, text, double precision, timestamptz,
                                              text, text, jsonb) FROM PUBLIC;
DO $$
DECLARE
    grantee_name text;
BEGIN
    FOR grantee_name IN
        SELECT CASE WHEN acl.grantee = 0 THEN 'PUBLIC' ELSE quote_ident(r.rolname) END
        FROM pg_proc p
        CROSS JOIN LATERAL aclexplode(p.proacl) AS acl
        LEFT JOIN pg_roles r ON r.oid = acl.grantee
        WHERE p.oid = '@schema@.publish_event(text, jsonb, text, text, text, text, double precision, timestamptz, text, text)'::regprocedure
          AND acl.privilege_type = 'EXECUTE' AND acl.grantee <> p.proowner
    LOOP
        EXECUTE 'GRANT EXECUTE ON FUNCTION @schema@.publish_event(text, jsonb, text, text, text, text, '
                'double precision, timestamptz, text, text, jsonb) TO ' || grantee_name;
    END LOOP;
END
$$;
DROP FUNCTION @schema@.publish_event(text, jsonb, text, text, text, text, double precision, timestamptz, text, text);

-- Bulk operations gain 'replay' (POST /v1/endpoints/{id}/replay).
ALTER TABLE operations DROP CONSTRAINT operations_action_check;
ALTER TABLE operations ADD CONSTRAINT operations_action_check CHECK (action IN ('retry', 'cancel', 'replay'));
