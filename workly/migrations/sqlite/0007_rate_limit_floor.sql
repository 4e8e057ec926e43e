-- Rates are at least 0.000001 dispatches per second (see the PostgreSQL migration); SQLite's
-- claim did not fail on smaller ones, but they go the same way.
UPDATE queues SET rate_limit = 0.000001 WHERE rate_limit < 0.000001;
