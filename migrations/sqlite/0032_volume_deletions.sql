-- volume_deletions: the heartbeat tells every node of a region to remove
-- the files of the region's volumes deleted in the last minutes
-- (store.VolumesToRemove); this index finds those few among all the
-- deleted ones.
CREATE INDEX volumes_deleted ON volumes(region_id, deleted_at) WHERE deleted_at IS NOT NULL;
