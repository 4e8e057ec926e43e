-- An optional signing secret per queue (see the Postgres migration).
ALTER TABLE queues ADD COLUMN signing_secret TEXT;
