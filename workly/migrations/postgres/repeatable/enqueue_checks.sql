-- revision: 3
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
-- they are kept safe and which Python rules they mirror): the workly_* helpers that check
-- and shape the arguments of enqueue_task and publish_event (enqueue_functions.sql).

CREATE OR REPLACE FUNCTION @schema@.workly_refuse(field text, message text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION USING ERRCODE = '22023', MESSAGE = field || ': ' || message, COLUMN = field;
END
$$;

-- task_/evt_ + a ULID, as workly/ids.py makes them: 48 bits of milliseconds, 80 random
-- bits (bytes 0-5 and 10-13 of a version 4 UUID, which carry no version or variant bits),
-- as 26 Crockford base32 digits.
CREATE OR REPLACE FUNCTION @schema@.workly_new_id(prefix text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    alphabet constant text := '0123456789ABCDEFGHJKMNPQRSTVWXYZ';
    random_bytes bytea := uuid_send(gen_random_uuid());
    millis bigint := floor(extract(epoch FROM clock_timestamp()) * 1000);
    bits bit(130);
    digits text := '';
BEGIN
    bits := B'00' || millis::bit(48)
            || ('x' || encode(substring(random_bytes FROM 1 FOR 6) || substring(random_bytes FROM 11 FOR 4), 'hex'))::bit(80);
    FOR i IN 0..25 LOOP
        digits := digits || substr(alphabet, substring(bits FROM i * 5 + 1 FOR 5)::integer + 1, 1);
    END LOOP;
    RETURN prefix || '_' || digits;
END
$$;

-- 1-255 printable characters (ShortText in workly/api/schemas.py).
CREATE OR REPLACE FUNCTION @schema@.workly_check_short_text(field text, value text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF value IS NULL THEN
        RETURN;
    END IF;
    IF char_length(value) < 1 OR char_length(value) > 255 THEN
        PERFORM @schema@.workly_refuse(field, 'must be 1 to 255 characters');
    END IF;
    IF value ~ '[\x01-\x1f\x7f]' THEN
        PERFORM @schema@.workly_refuse(field, 'must not contain control characters');
    END IF;
END
$$;

-- The keys a task and an event both take: ordering key, fairness key, idempotency key (not
-- one of the schedules' firings').
CREATE OR REPLACE FUNCTION @schema@.workly_check_keys(key text, tenant text, idempotency_key text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM @schema@.workly_check_short_text('key', key);
    PERFORM @schema@.workly_check_short_text('tenant', tenant);
    PERFORM @schema@.workly_check_short_text('idempotency_key', idempotency_key);
    IF left(idempotency_key, 9) = 'schedule:' THEN  -- workly/reserved_names.py
        PERFORM @schema@.workly_refuse('idempotency_key',
                                       'idempotency keys starting with ''schedule:'' are Workly''s own');
    END IF;
END
$$;

-- An event's labels (workly/webhooks.py's check_labels): an object of at most 10 string
-- pairs, keys of 1-64 letters, digits, '_' or '-', values of at most 256 characters.
CREATE OR REPLACE FUNCTION @schema@.workly_check_labels(labels jsonb) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    label record;
BEGIN
    IF jsonb_typeof(labels) <> 'object' THEN
        PERFORM @schema@.workly_refuse('labels', 'must be an object of string pairs');
    END IF;
    IF (SELECT count(*) FROM jsonb_object_keys(labels)) > 10 THEN
        PERFORM @schema@.workly_refuse('labels', 'at most 10 labels');
    END IF;
    FOR label IN SELECT l.key, l.value FROM jsonb_each(labels) AS l LOOP
        IF label.key !~ '^[A-Za-z0-9_-]{1,64}$' THEN
            PERFORM @schema@.workly_refuse('labels', format('label %s: keys are 1 to 64 letters, digits, _ or -',
                                                            to_json(label.key)));
        END IF;
        IF jsonb_typeof(label.value) <> 'string' OR char_length(label.value #>> '{}') > 256 THEN
            PERFORM @schema@.workly_refuse('labels', format('label %s: values are strings of at most 256 characters',
                                                            to_json(label.key)));
        END IF;
    END LOOP;
END
$$;

-- Python's ipaddress.IPv6Address, which the API's URL parser applies to [literals].
CREATE OR REPLACE FUNCTION @schema@.workly_is_ipv6(address text) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    zone_at integer := position('%' IN address);
    parts text[];
    octets text[];
    octet text;
    n integer;
    skip integer;
    hi integer;
    lo integer;
BEGIN
    IF zone_at > 0 THEN
        IF substr(address, zone_at + 1) = '' OR position('%' IN substr(address, zone_at + 1)) > 0 THEN
            RETURN false;
        END IF;
        address := substr(address, 1, zone_at - 1);
    END IF;
    IF address = '' THEN
        RETURN false;
    END IF;
    parts := string_to_array(address, ':');
    n := cardinality(parts);
    IF n < 3 THEN
        RETURN false;
    END IF;
    IF position('.' IN parts[n]) > 0 THEN  -- an IPv4 tail: two hextets
        octets := string_to_array(parts[n], '.');
        IF cardinality(octets) <> 4 THEN
            RETURN false;
        END IF;
        FOREACH octet IN ARRAY octets LOOP
            IF octet !~ '^[0-9]{1,3}$' OR (octet <> '0' AND left(octet, 1) = '0') OR octet::integer > 255 THEN
                RETURN false;
            END IF;
        END LOOP;
        parts := parts[1:n - 1] || ARRAY['0', '0'];
        n := n + 1;
    END IF;
    IF n > 9 THEN
        RETURN false;
    END IF;
    FOR i IN 2..n - 1 LOOP
        IF parts[i] = '' THEN
            IF skip IS NOT NULL THEN
                RETURN false;  -- a second '::'
            END IF;
            skip := i;
        END IF;
    END LOOP;
    IF skip IS NOT NULL THEN
        hi := skip - 1;
        lo := n - skip;
        IF parts[1] = '' THEN
            hi := hi - 1;
            IF hi <> 0 THEN
                RETURN false;
            END IF;
        END IF;
        IF parts[n] = '' THEN
            lo := lo - 1;
            IF lo <> 0 THEN
                RETURN false;
            END IF;
        END IF;
        IF 8 - (hi + lo) < 1 THEN
            RETURN false;
        END IF;
    ELSE
        IF n <> 8 THEN
            RETURN false;
        END IF;
        hi := n;
        lo := 0;
    END IF;
    FOR i IN 1..hi LOOP
        IF parts[i] !~ '^[0-9A-Fa-f]{1,4}$' THEN
            RETURN false;
        END IF;
    END LOOP;
    FOR i IN n - lo + 1..n LOOP
        IF parts[i] !~ '^[0-9A-Fa-f]{1,4}$' THEN
            RETURN false;
        END IF;
    END LOOP;
    RETURN true;
END
$$;

-- workly/request_rules.py's check_url; returns the URL's origin (scheme://host:port), the key of
-- a plain task's circuit breaker (workly/webhooks.py's origin_of). One difference: a host
-- name with non-ASCII characters must be written in punycode here (the API encodes it).
CREATE OR REPLACE FUNCTION @schema@.workly_check_url(field text, url text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    scheme text;
    rest text;
    netloc text;
    host text;
    port text;
    port_number integer;
BEGIN
    IF url IS NULL THEN
        PERFORM @schema@.workly_refuse(field, 'is required');
    END IF;
    IF char_length(url) > 4096 THEN
        PERFORM @schema@.workly_refuse(field, 'must be at most 4096 characters');
    END IF;
    IF url ~ '[\x01-\x20\x7f-\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]' THEN
        PERFORM @schema@.workly_refuse(field, 'the URL must not contain whitespace or control characters');
    END IF;
    scheme := substring(url FROM '^([A-Za-z][A-Za-z0-9+.-]*):');
    IF scheme IS NULL OR lower(scheme COLLATE "C") NOT IN ('http', 'https') THEN
        PERFORM @schema@.workly_refuse(field, 'the URL scheme must be http or https');
    END IF;
    rest := substr(url, char_length(scheme) + 2);
    scheme := lower(scheme COLLATE "C");
    IF left(rest, 2) <> '//' THEN
        PERFORM @schema@.workly_refuse(field, 'the URL must name a host');
    END IF;
    netloc := substring(rest FROM '^//([^/?#]*)');
    IF netloc ~ '[^\x01-\x7f]' THEN
        PERFORM @schema@.workly_refuse(field, 'the URL host must be ASCII: write an international domain name '
                                     'in punycode (xn--...)');
    END IF;
    IF position('@' IN netloc) > 0 THEN
        PERFORM @schema@.workly_refuse(field, 'the URL must not carry credentials (user:password@); use a header');
    END IF;
    IF left(netloc, 1) = '[' THEN
        IF netloc !~ '^\[[^][]*\](:.*)?$' THEN
            PERFORM @schema@.workly_refuse(field, 'not a valid URL: invalid IPv6 literal');
        END IF;
        host := substring(netloc FROM '^\[([^]]*)\]');
        port := substr(substring(netloc FROM '^\[[^]]*\](.*)$'), 2);
        IF position('\' IN netloc) > 0 THEN
            PERFORM @schema@.workly_refuse(field, 'not a valid URL: a backslash is not allowed in the host');
        END IF;
        IF lower(left(host, 1) COLLATE "C") = 'v' THEN
            PERFORM @schema@.workly_refuse(field, 'the URL host is an IPvFuture literal, which cannot be reached');
        END IF;
        IF NOT @schema@.workly_is_ipv6(host) THEN
            PERFORM @schema@.workly_refuse(field, format('not a valid URL: %L is not an IPv6 address', host));
        END IF;
    ELSE
        IF netloc ~ '[][]' THEN
            PERFORM @schema@.workly_refuse(field, 'not a valid URL: invalid IPv6 literal');
        END IF;
        host := split_part(netloc, ':', 1);
        port := substr(netloc, char_length(host) + 2);
        IF host = '' THEN
            PERFORM @schema@.workly_refuse(field, 'the URL must name a host');
        END IF;
        IF host !~ '^([A-Za-z0-9._~!$&''()*+,;=-]|%[0-9A-Fa-f]{2})+$' THEN
            PERFORM @schema@.workly_refuse(field, format('the URL host %L has characters a host name cannot have', host));
        END IF;
    END IF;
    IF port <> '' THEN
        port := ltrim(port, '0');
        IF port !~ '^[0-9]{1,5}$' OR port::integer NOT BETWEEN 1 AND 65535 THEN
            PERFORM @schema@.workly_refuse(field, 'the URL port must be 1-65535');
        END IF;
        port_number := port::integer;
    END IF;
    host := lower(host COLLATE "C");
    IF position(':' IN host) > 0 THEN
        host := '[' || host || ']';
    END IF;
    RETURN scheme || '://' || host || ':'
           || coalesce(port_number, CASE scheme WHEN 'https' THEN 443 ELSE 80 END);
END
$$;

-- workly/request_rules.py's check_headers.
CREATE OR REPLACE FUNCTION @schema@.workly_check_headers(headers jsonb) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    name text;
    value jsonb;
    text_value text;
    seen text[] := '{}';
    total bigint := 0;
BEGIN
    IF headers IS NULL OR jsonb_typeof(headers) <> 'object' THEN
        PERFORM @schema@.workly_refuse('headers', 'must be a JSON object of header names and string values');
    END IF;
    IF (SELECT count(*) FROM jsonb_object_keys(headers)) > 64 THEN
        PERFORM @schema@.workly_refuse('headers', 'at most 64 headers');
    END IF;
    FOR name, value IN SELECT * FROM jsonb_each(headers) LOOP
        IF jsonb_typeof(value) <> 'string' THEN
            PERFORM @schema@.workly_refuse('headers', format('header %L must have a string value', name));
        END IF;
        text_value := value #>> '{}';
        IF name !~ '^[!#$%&''*+.^_`|~0-9A-Za-z-]+$' THEN
            PERFORM @schema@.workly_refuse('headers', format('invalid header name %L', name));
        END IF;
        IF text_value ~ '[\x01-\x08\x0a-\x1f\x7f-\x9f]' THEN
            PERFORM @schema@.workly_refuse('headers', format('header %L contains a control character (CR, LF, NUL, ...)', name));
        END IF;
        IF text_value <> btrim(text_value, E' \t') THEN
            PERFORM @schema@.workly_refuse('headers', format('header %L begins or ends with whitespace', name));
        END IF;
        IF text_value ~ '[^\x01-\xff]' THEN
            PERFORM @schema@.workly_refuse('headers', format('header %L has characters HTTP headers cannot carry (not latin-1)', name));
        END IF;
        IF lower(name COLLATE "C") IN ('webhook-id', 'webhook-timestamp', 'webhook-signature') THEN
            PERFORM @schema@.workly_refuse('headers', format('header %L is set by Workly on every delivery (Standard Webhooks)', name));
        END IF;
        IF lower(name COLLATE "C") IN ('host', 'content-length', 'transfer-encoding', 'connection', 'keep-alive',
                           'proxy-connection', 'proxy-authorization', 'proxy-authenticate', 'te',
                           'trailer', 'upgrade', 'expect') THEN
            PERFORM @schema@.workly_refuse('headers', format('header %L belongs to the connection; Workly sets what it needs itself', name));
        END IF;
        IF char_length(text_value) > 8192 THEN
            PERFORM @schema@.workly_refuse('headers', format('header %L is longer than 8192 characters', name));
        END IF;
        IF lower(name COLLATE "C") = ANY (seen) THEN
            PERFORM @schema@.workly_refuse('headers', format('header %L is given twice', name));
        END IF;
        seen := seen || lower(name COLLATE "C");
        total := total + char_length(name) + char_length(text_value);
    END LOOP;
    IF total > 32768 THEN
        PERFORM @schema@.workly_refuse('headers', 'the headers together are longer than 32768 characters');
    END IF;
END
$$;

-- check_base64 (workly/api/schemas.py): canonical base64 (RFC 4648: groups of four, the last
-- padded with exactly the '=' it needs); the decoded bytes, or a refusal.
CREATE OR REPLACE FUNCTION @schema@.workly_base64(field text, value text) RETURNS bytea
LANGUAGE plpgsql AS $$
BEGIN
    IF value !~ '^([A-Za-z0-9+/]{4})*([A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$' THEN
        PERFORM @schema@.workly_refuse(field, 'is not valid base64');
    END IF;
    RETURN decode(value, 'base64');
END
$$;

-- check_run_at (workly/api/schemas.py), and delay: when a task or event is due.
CREATE OR REPLACE FUNCTION @schema@.workly_due_at(now_ timestamptz, delay double precision, run_at timestamptz) RETURNS timestamptz
LANGUAGE plpgsql AS $$
BEGIN
    IF delay IS NOT NULL AND run_at IS NOT NULL THEN
        PERFORM @schema@.workly_refuse('delay', 'give either delay or run_at, not both');
    END IF;
    IF delay IS NOT NULL AND NOT (delay >= 0 AND delay <= 366 * 86400) THEN
        PERFORM @schema@.workly_refuse('delay', 'must be 0 to 31622400 seconds');
    END IF;
    IF run_at IS NOT NULL AND NOT (run_at >= '1970-01-01T00:00:00Z' AND run_at < '3000-01-01T00:00:00Z') THEN
        PERFORM @schema@.workly_refuse('run_at', 'must fall in the years 1970 to 2999 (UTC)');
    END IF;
    RETURN coalesce(run_at, now_ + make_interval(secs => coalesce(delay, 0)));
END
$$;

CREATE OR REPLACE FUNCTION @schema@.workly_check_range(field text, value double precision, low double precision,
                                   high double precision, low_included boolean) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF value IS NOT NULL AND NOT ((value > low OR (low_included AND value = low)) AND value <= high) THEN
        PERFORM @schema@.workly_refuse(field, format('must be %s %s and at most %s', CASE WHEN low_included THEN 'at least' ELSE 'more than' END, low, high));
    END IF;
END
$$;

-- The body's bytes and the headers to send them with (workly/body.py's encode_body).
CREATE OR REPLACE FUNCTION @schema@.workly_encode_body(INOUT headers jsonb, body jsonb, body_base64 text, OUT bytes bytea)
LANGUAGE plpgsql AS $$
DECLARE
    content_type text;
    media text;
BEGIN
    IF body IS NOT NULL AND body_base64 IS NOT NULL THEN
        PERFORM @schema@.workly_refuse('body', 'give either body or body_base64, not both');
    END IF;
    IF body_base64 IS NOT NULL THEN
        bytes := @schema@.workly_base64('body_base64', body_base64);
        RETURN;
    END IF;
    IF body IS NULL OR body = 'null'::jsonb THEN
        bytes := '';
        RETURN;
    END IF;
    SELECT h.value #>> '{}' INTO content_type FROM jsonb_each(headers) AS h WHERE lower(h.key COLLATE "C") = 'content-type';
    IF content_type IS NULL THEN
        headers := headers || '{"content-type": "application/json"}';
    ELSE
        media := lower(btrim(split_part(content_type, ';', 1), E' \t\u00a0') COLLATE "C");
        IF jsonb_typeof(body) = 'string' AND media <> 'application/json' AND media NOT LIKE '%+json' THEN
            bytes := convert_to(body #>> '{}', 'UTF8');
            RETURN;
        END IF;
    END IF;
    bytes := convert_to(body::text, 'UTF8');
END
$$;

CREATE OR REPLACE FUNCTION @schema@.workly_check_body_size(field text, bytes bytea) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    limit_bytes integer := (SELECT max_body_bytes FROM @schema@.sql_limits);
BEGIN
    IF octet_length(bytes) > limit_bytes THEN
        PERFORM @schema@.workly_refuse(field, format('is %s bytes; at most %s (WORKLY_MAX_BODY_BYTES)', octet_length(bytes), limit_bytes));
    END IF;
END
$$;

-- check_stop_on (workly/models.py): the list to store, comma separated, without repeats.
CREATE OR REPLACE FUNCTION @schema@.workly_stop_on(stop_on text[]) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    entry text;
    kept text[] := '{}';
BEGIN
    IF stop_on IS NULL THEN
        RETURN NULL;
    END IF;
    IF array_ndims(stop_on) > 1 THEN
        PERFORM @schema@.workly_refuse('stop_on', 'must be a list of status codes and classes');
    END IF;
    IF cardinality(stop_on) > 100 THEN
        PERFORM @schema@.workly_refuse('stop_on', 'lists at most 100 entries');
    END IF;
    FOREACH entry IN ARRAY stop_on LOOP
        IF entry IS NULL OR entry !~ '^[345](xx|[0-9][0-9])$' THEN
            PERFORM @schema@.workly_refuse('stop_on', format('entry %L must be a status code from 300 to 599 ("404") '
                                                    'or a class ("3xx", "4xx", "5xx")', entry));
        END IF;
        IF NOT entry = ANY (kept) THEN
            kept := kept || entry;
        END IF;
    END LOOP;
    RETURN array_to_string(kept, ',');
END
$$;

CREATE OR REPLACE FUNCTION @schema@.workly_check_callbacks(callback_url text, failure_callback_url text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF callback_url IS NOT NULL THEN
        PERFORM @schema@.workly_check_url('callback_url', callback_url);
    END IF;
    IF failure_callback_url IS NOT NULL THEN
        PERFORM @schema@.workly_check_url('failure_callback_url', failure_callback_url);
    END IF;
END
$$;

REVOKE ALL ON FUNCTION @schema@.workly_refuse(text, text), @schema@.workly_new_id(text), @schema@.workly_check_short_text(text, text),
                       @schema@.workly_check_keys(text, text, text),
                       @schema@.workly_is_ipv6(text), @schema@.workly_check_url(text, text), @schema@.workly_check_headers(jsonb),
                       @schema@.workly_base64(text, text), @schema@.workly_due_at(timestamptz, double precision, timestamptz),
                       @schema@.workly_check_range(text, double precision, double precision, double precision, boolean),
                       @schema@.workly_encode_body(jsonb, jsonb, text), @schema@.workly_check_body_size(text, bytea),
                       @schema@.workly_stop_on(text[]), @schema@.workly_check_callbacks(text, text),
                       @schema@.workly_check_labels(jsonb) FROM PUBLIC;
