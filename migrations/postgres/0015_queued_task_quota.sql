-- A per-user override of the queued job tasks quota (NULL: the default).
ALTER TABLE users ADD COLUMN max_queued_tasks BIGINT;
