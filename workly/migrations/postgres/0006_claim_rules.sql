-- The claim's rules, as SQL functions named after the rulebook, workly/storage/claim_rules.py:
-- claim_<rule> here is <rule>() there, with the same arguments and the same arithmetic, so
-- the claim statement (sql/postgres.sql, claim_tasks) and SQLite's claim (sqlite_claim.py,
-- which calls the Python functions) follow one set of rules. tests/storage/
-- test_claim_differential.py holds them to the same answers, alone and inside the claim.
-- Each is one IMMUTABLE SQL expression, which the planner inlines: no call overhead.

-- A rate-limited queue may dispatch a tenth of a second's worth at once, at least one.
CREATE FUNCTION claim_burst(rate_limit double precision) RETURNS double precision
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT greatest(1.0, rate_limit / 10)
$$;

-- The bucket after `elapsed` seconds of refill; a bucket never used starts full.
CREATE FUNCTION claim_tokens_now(rate_limit double precision, tokens double precision,
                                 elapsed double precision) RETURNS double precision
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN tokens IS NULL OR elapsed IS NULL THEN claim_burst(rate_limit)
                ELSE least(claim_burst(rate_limit), tokens + rate_limit * greatest(0.0, elapsed)) END
$$;

-- How many tasks a queue may have claimed now: its free concurrency, its whole tokens, the batch.
CREATE FUNCTION claim_take(max_concurrency integer, running integer, tokens double precision,
                           batch integer) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT greatest(0, least(max_concurrency - running, batch,
                             coalesce(floor(tokens)::integer, batch)))
$$;

-- How many candidates to read per group (tenant or key) so the take can be filled.
CREATE FUNCTION claim_share(take integer, groups integer) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT ceil(take::numeric / least(groups, take))::integer
$$;

-- Seconds until a drained bucket holds a whole token again; null when it holds one.
CREATE FUNCTION claim_rate_wait(rate_limit double precision, tokens_left double precision)
RETURNS double precision
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN tokens_left < 1 THEN (1 - tokens_left) / rate_limit END
$$;
