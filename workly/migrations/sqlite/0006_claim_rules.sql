-- The claim's rules (see the PostgreSQL migration): SQLite's claim calls them in Python,
-- from workly/storage/claim_rules.py, so there is nothing to create here. The file keeps
-- the migration numbers of both dialects alike.
SELECT 1;
