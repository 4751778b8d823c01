-- An instance's disk: its writable root filesystem, of disk_gib (0 for
-- instances launched before disks), as its agent last measured it
-- (disk_used_bytes; disk_enforced NULL until reported: whether writes past
-- the size fail inside, disk_note why not). The part beyond the policy's
-- free GiB is billed per started hour at the volume price from
-- disk_billed_until on (NULL: nothing due), carry being the fractions of a
-- fen not yet charged. A job's tasks get its disk_gib.
ALTER TABLE instances ADD COLUMN disk_gib INTEGER NOT NULL DEFAULT 0;
ALTER TABLE instances ADD COLUMN disk_used_bytes BIGINT NOT NULL DEFAULT 0;
ALTER TABLE instances ADD COLUMN disk_enforced BIGINT;
ALTER TABLE instances ADD COLUMN disk_note TEXT NOT NULL DEFAULT '';
ALTER TABLE instances ADD COLUMN disk_billed_until BIGINT;
ALTER TABLE instances ADD COLUMN disk_carry BIGINT NOT NULL DEFAULT 0;
CREATE INDEX instances_disk_due ON instances(disk_billed_until) WHERE disk_billed_until IS NOT NULL;
ALTER TABLE jobs ADD COLUMN disk_gib INTEGER NOT NULL DEFAULT 0;
