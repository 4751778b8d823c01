-- Spot history for the published interruption rates: every run (attempt)
-- of a spot instance, and an hourly roll-up so that a year of history is
-- read as 720 rows, not every instance.

CREATE TABLE spot_runs (
    instance_id INTEGER NOT NULL REFERENCES instances(id),
    attempt     INTEGER NOT NULL,
    model_id    TEXT NOT NULL,
    region_id   TEXT NOT NULL,
    gpus        INTEGER NOT NULL,
    started_at  INTEGER NOT NULL,
    ended_at    INTEGER,             -- NULL while running
    rolled      INTEGER NOT NULL DEFAULT 0, -- counted in spot_hourly
    PRIMARY KEY (instance_id, attempt)
);
CREATE INDEX spot_runs_to_roll ON spot_runs(ended_at) WHERE rolled = 0;
CREATE INDEX spot_runs_open ON spot_runs(model_id, region_id, ended_at);
ALTER TABLE interruptions ADD COLUMN rolled INTEGER NOT NULL DEFAULT 0;
CREATE INDEX interruptions_to_roll ON interruptions(notice_at) WHERE rolled = 0;

-- Per model, region and UTC hour: spot GPU-seconds run, interruptions (by
-- reason) and bursts (interruptions more than 3 minutes after the previous
-- one of the same model and region).
CREATE TABLE spot_hourly (
    model_id       TEXT NOT NULL,
    region_id      TEXT NOT NULL,
    hour           INTEGER NOT NULL,
    gpu_seconds    INTEGER NOT NULL DEFAULT 0,
    interruptions  INTEGER NOT NULL DEFAULT 0,
    bursts         INTEGER NOT NULL DEFAULT 0,
    by_reservation INTEGER NOT NULL DEFAULT 0,
    by_on_demand   INTEGER NOT NULL DEFAULT 0,
    by_node_failure INTEGER NOT NULL DEFAULT 0,
    by_admin       INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (model_id, region_id, hour)
) WITHOUT ROWID;
