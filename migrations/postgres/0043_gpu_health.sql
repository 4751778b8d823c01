-- GPU health (issue 49). A GPU that failed (a critical XID, an
-- uncorrectable ECC error) stays out of service until an admin returns
-- it, whatever later heartbeats say: fault_at is set, healthy stays 0.
ALTER TABLE gpus ADD COLUMN fault_reason TEXT NOT NULL DEFAULT '';
ALTER TABLE gpus ADD COLUMN fault_xid BIGINT NOT NULL DEFAULT 0;
ALTER TABLE gpus ADD COLUMN fault_at BIGINT;
-- The last health the agent reported, for the return's check.
ALTER TABLE gpus ADD COLUMN reported_fault TEXT NOT NULL DEFAULT '';

-- Every failure, for the fleet page, the node's drain rule and the
-- record: which instance it ended, and when the GPU was returned.
CREATE TABLE gpu_faults (
    id          BIGSERIAL PRIMARY KEY,
    gpu_uuid    TEXT NOT NULL,
    node_id     TEXT NOT NULL,
    reason      TEXT NOT NULL,
    xid         BIGINT NOT NULL DEFAULT 0,
    at          BIGINT NOT NULL,
    returned_at BIGINT,
    returned_by BIGINT
);
CREATE INDEX gpu_faults_node ON gpu_faults(node_id, at);
CREATE INDEX gpu_faults_gpu ON gpu_faults(gpu_uuid, id);

-- Why a node drains when the portal drained it (its GPUs kept failing).
ALTER TABLE nodes ADD COLUMN drain_note TEXT NOT NULL DEFAULT '';
