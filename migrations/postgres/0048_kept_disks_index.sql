-- The tick looks for kept disks of accounts at zero every minute: only
-- the kept ones, through their own index, not every instance ever run.
CREATE INDEX instances_kept_disks ON instances(user_id) WHERE disk_kept <> 0 AND disk_released_at IS NULL AND ended_at IS NOT NULL AND disk_billed_until IS NOT NULL;
