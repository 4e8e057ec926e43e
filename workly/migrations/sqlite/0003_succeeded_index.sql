-- Retention prunes succeeded tasks by age (see the Postgres migration).
CREATE INDEX tasks_succeeded ON tasks (updated_at) WHERE status = 'succeeded';
