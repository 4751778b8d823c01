-- disk_kept: the instance's disk outlives its run — asked by a stop that
-- keeps it (while it ends) and then kept (status stopped): it starts again
-- with it, on any node of the region. disk_released_at: its owner let the
-- kept disk go (DELETE /instances/{id}); the region's nodes remove the file.
ALTER TABLE instances ADD COLUMN disk_kept INTEGER NOT NULL DEFAULT 0;
ALTER TABLE instances ADD COLUMN disk_released_at BIGINT;
CREATE INDEX instances_disk_released ON instances(region_id, disk_released_at) WHERE disk_released_at IS NOT NULL;
