-- The API accepted any rate_limit above 0 until this version; a subnormal one (below about
-- 1e-308) overflowed the claim's token arithmetic (float8) and so failed every claim, of
-- every queue. Rates are now at least 0.000001 dispatches per second (models.MIN_RATE_LIMIT):
-- raise any stored below that to it.
UPDATE queues SET rate_limit = 0.000001 WHERE rate_limit < 0.000001;
