-- A running instance's GPUs over its life, for the chart on its page:
-- every few minutes the mean utilisation and the memory in use of its
-- GPUs (from the nodes' telemetry); kept a week.
CREATE TABLE instance_samples (
    instance_id         BIGINT NOT NULL REFERENCES instances(id),
    at                  BIGINT NOT NULL,
    utilization_percent INTEGER NOT NULL,
    memory_used_mib     BIGINT NOT NULL,
    PRIMARY KEY (instance_id, at)
);
CREATE INDEX instance_samples_at ON instance_samples(at);
-- When the fleet was last sampled (one row).
CREATE TABLE instance_sampling (
    id      INT PRIMARY KEY CHECK (id = 1),
    last_at BIGINT NOT NULL
);
