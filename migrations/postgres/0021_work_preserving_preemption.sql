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
-- A rebalance recommendation: the book will want the instance's GPUs soon
-- (posted once). notice_seconds: the notice its launch asked for (NULL:
-- the policy's). A drill: the real notice to the owner's own spot
-- instance, withdrawn on ready or when it runs out; its result is kept.
ALTER TABLE instances ADD COLUMN rebalance_at INTEGER;
ALTER TABLE instances ADD COLUMN notice_seconds INTEGER;
ALTER TABLE instances ADD COLUMN drill_started_at INTEGER;
ALTER TABLE instances ADD COLUMN drill_wall_at INTEGER;
ALTER TABLE instances ADD COLUMN drill_seconds INTEGER;
ALTER TABLE instances ADD COLUMN drill_ready_after REAL;
-- The few live launches that asked for their own notice, for the tick.
CREATE INDEX instances_asked_notice ON instances(model_id, region_id, notice_seconds) WHERE notice_seconds IS NOT NULL AND status IN ('pending', 'running');
