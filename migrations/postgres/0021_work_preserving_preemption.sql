-- Work-preserving preemption. A workload's checkpoint reports are stamped
-- in business time (last_checkpoint_at); checkpoint_reported is the
-- agent's own stamp of the latest, so a report that heartbeats repeat is
-- applied once. An interruption records the work it lost (GPU-seconds
-- since the last report at the stop). ready_at: the workload said "saved"
-- after its notice.
ALTER TABLE instances ADD COLUMN last_checkpoint_at INTEGER;
ALTER TABLE instances ADD COLUMN checkpoint_reported TEXT;
ALTER TABLE instances ADD COLUMN lost_gpu_seconds INTEGER;
ALTER TABLE instances ADD COLUMN ready_at INTEGER;
ALTER TABLE interruptions ADD COLUMN lost_gpu_seconds INTEGER;
