-- Idle stop: an on-demand or spot instance launched with
-- idle_stop_minutes is stopped after that many minutes with all its GPUs
-- at 0 % utilisation; idle_since is when they were last seen going idle.
ALTER TABLE instances ADD COLUMN idle_stop_minutes INTEGER;
ALTER TABLE instances ADD COLUMN idle_since INTEGER;
-- Why the platform stopped an instance its owner did not (idle stop).
ALTER TABLE instances ADD COLUMN stop_reason TEXT;
-- The tick looks at the watched instances alone.
CREATE INDEX instances_idle_watch ON instances(id) WHERE idle_stop_minutes IS NOT NULL AND status = 'running';
