-- A team lends its idle GPUs (issue 47): a member's guaranteed share, and
-- which runs borrow past it (spot-priced, taken back for a teammate).
ALTER TABLE team_members ADD COLUMN reserved_running_gpus INTEGER;
ALTER TABLE instances ADD COLUMN borrowed INTEGER NOT NULL DEFAULT 0;
