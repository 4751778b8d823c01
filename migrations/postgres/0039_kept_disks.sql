-- disk_kept: the instance's disk outlives its run — asked by a stop that
-- keeps it (while it ends) and then kept (status stopped): it starts again
-- with it, on any node of the region. disk_released_at: its owner let the
-- kept disk go (DELETE /instances/{id}); the region's nodes remove the file.
ALTER TABLE instances ADD COLUMN disk_kept INTEGER NOT NULL DEFAULT 0;
ALTER TABLE instances ADD COLUMN disk_released_at BIGINT;
CREATE INDEX instances_disk_released ON instances(region_id, disk_released_at) WHERE disk_released_at IS NOT NULL;
-- disk_suspended_at: the owner's balance ran out while the disk was kept:
-- unbilled, kept 15 days from then (disk_warned_at: told 3 days before),
-- then released; paying its arrears lifts it.
ALTER TABLE instances ADD COLUMN disk_suspended_at BIGINT;
ALTER TABLE instances ADD COLUMN disk_warned_at BIGINT;
CREATE INDEX instances_disk_suspended ON instances(disk_suspended_at) WHERE disk_suspended_at IS NOT NULL;
