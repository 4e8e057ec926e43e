-- Retention prunes succeeded tasks by age: a partial index holds only succeeded rows, in
-- the order they finished, so each pruning batch reads only what it deletes.
CREATE INDEX tasks_succeeded ON tasks (updated_at) WHERE status = 'succeeded';
