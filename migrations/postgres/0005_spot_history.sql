-- PostgreSQL edition of the sqlite/ migration with the same number: the same
-- tables, columns and indexes, with 64-bit integers and identity keys.
-- Spot history for the published interruption rates: every run (attempt)
-- of a spot instance, and an hourly roll-up so that a year of history is
-- read as 720 rows, not every instance.

CREATE TABLE spot_runs (
    instance_id BIGINT NOT NULL REFERENCES instances(id),
    attempt     BIGINT NOT NULL,
    model_id    TEXT NOT NULL,
    region_id   TEXT NOT NULL,
    gpus        BIGINT NOT NULL,
    started_at  BIGINT NOT NULL,
    ended_at    BIGINT,             -- NULL while running
    rolled      BIGINT NOT NULL DEFAULT 0, -- counted in spot_hourly
    PRIMARY KEY (instance_id, attempt)
);
CREATE INDEX spot_runs_to_roll ON spot_runs(ended_at) WHERE rolled = 0;
CREATE INDEX spot_runs_open ON spot_runs(model_id, region_id, ended_at);
ALTER TABLE interruptions ADD COLUMN rolled BIGINT NOT NULL DEFAULT 0;
CREATE INDEX interruptions_to_roll ON interruptions(notice_at) WHERE rolled = 0;

-- Per model, region and UTC hour: spot GPU-seconds run, interruptions (by
-- reason) and bursts (interruptions more than 3 minutes after the previous
-- one of the same model and region).
CREATE TABLE spot_hourly (
    model_id       TEXT NOT NULL,
    region_id      TEXT NOT NULL,
    hour           BIGINT NOT NULL,
    gpu_seconds    BIGINT NOT NULL DEFAULT 0,
    interruptions  BIGINT NOT NULL DEFAULT 0,
    bursts         BIGINT NOT NULL DEFAULT 0,
    by_reservation BIGINT NOT NULL DEFAULT 0,
    by_on_demand   BIGINT NOT NULL DEFAULT 0,
    by_node_failure BIGINT NOT NULL DEFAULT 0,
    by_admin       BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (model_id, region_id, hour)
);
