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

-- The claim's rules (migration 0006 made them; workly/storage/claim_rules.py says what they
-- are): claim_<rule> here is <rule>() there, with the same arguments and the same arithmetic.
-- Each is one IMMUTABLE SQL expression, which the planner inlines: no call overhead.

-- A rate-limited queue may dispatch a tenth of a second's worth at once, at least one.
CREATE OR REPLACE FUNCTION @schema@.claim_burst(rate_limit double precision) RETURNS double precision
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT greatest(1.0, rate_limit / 10)
$$;

-- The bucket after `elapsed` seconds of refill; a bucket never used starts full.
CREATE OR REPLACE FUNCTION @schema@.claim_tokens_now(rate_limit double precision, tokens double precision,
                                 elapsed double precision) RETURNS double precision
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN tokens IS NULL OR elapsed IS NULL THEN claim_burst(rate_limit)
                ELSE least(claim_burst(rate_limit), tokens + rate_limit * greatest(0.0, elapsed)) END
$$;

-- How many tasks a queue may have claimed now: its free concurrency, its whole tokens, the batch.
CREATE OR REPLACE FUNCTION @schema@.claim_take(max_concurrency integer, running integer, tokens double precision,
                           batch integer) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT greatest(0, least(max_concurrency - running, batch,
                             coalesce(floor(tokens)::integer, batch)))
$$;

-- How many candidates to read per group (tenant or key) so the take can be filled.
CREATE OR REPLACE FUNCTION @schema@.claim_share(take integer, groups integer) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT ceil(take::numeric / least(groups, take))::integer
$$;

-- Seconds until a drained bucket holds a whole token again; null when it holds one.
CREATE OR REPLACE FUNCTION @schema@.claim_rate_wait(rate_limit double precision, tokens_left double precision)
RETURNS double precision
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN tokens_left < 1 THEN (1 - tokens_left) / rate_limit END
$$;
