-- Node enrollment and liveness, instances (spot, on-demand, reserved) with
-- their GPUs, reservations' GPUs, and the interruption record.

CREATE TABLE enrollment_tokens (
    token_hash TEXT PRIMARY KEY,
    region_id  TEXT NOT NULL REFERENCES regions(id),
    created_at INTEGER NOT NULL,
    created_by INTEGER REFERENCES users(id),
    used_at    INTEGER,
    node_id    TEXT
);

ALTER TABLE nodes ADD COLUMN heartbeat_seconds INTEGER NOT NULL DEFAULT 10;
-- Bumped whenever what the node should run changes; agents long-poll on it.
ALTER TABLE nodes ADD COLUMN revision INTEGER NOT NULL DEFAULT 1;
ALTER TABLE gpus ADD COLUMN xid_errors INTEGER NOT NULL DEFAULT 0;
ALTER TABLE gpus ADD COLUMN last_xid INTEGER NOT NULL DEFAULT 0;
ALTER TABLE gpus ADD COLUMN ecc_uncorrected INTEGER NOT NULL DEFAULT 0;

CREATE TABLE instances (
    id                INTEGER PRIMARY KEY,
    user_id           INTEGER NOT NULL REFERENCES users(id),
    kind              TEXT NOT NULL CHECK (kind IN ('spot', 'on_demand', 'reserved')),
    model_id          TEXT NOT NULL REFERENCES models(id),
    region_id         TEXT NOT NULL REFERENCES regions(id),
    count             INTEGER NOT NULL CHECK (count > 0),
    command           TEXT NOT NULL,
    auto_restart      INTEGER NOT NULL DEFAULT 0,
    reservation_id    INTEGER REFERENCES reservations(id),
    status            TEXT NOT NULL CHECK (status IN ('pending', 'running', 'interrupting', 'interrupted', 'stopped', 'failed')),
    node_id           TEXT REFERENCES nodes(id),
    last_node_id      TEXT,                        -- where an auto-restarted instance ran before
    attempt           INTEGER NOT NULL DEFAULT 0,
    checkpoint_key    TEXT NOT NULL,
    price_fen         INTEGER NOT NULL,            -- per GPU-hour, fixed at launch
    created_at        INTEGER NOT NULL,
    started_at        INTEGER,                     -- current attempt's start
    ended_at          INTEGER,
    billed_minutes    INTEGER NOT NULL DEFAULT 0,  -- of finished attempts
    cost_fen          INTEGER NOT NULL DEFAULT 0,  -- of finished attempts
    notice_at         INTEGER,
    notice_wall_at    INTEGER,                     -- real time of the notice: agents count the notice from it
    deadline_at       INTEGER,
    grace_seconds     INTEGER,
    interrupt_reason  TEXT,
    stop_requested_at INTEGER,
    exit_code         INTEGER,
    error             TEXT NOT NULL DEFAULT '',
    restarts          INTEGER NOT NULL DEFAULT 0,
    log_tail          TEXT NOT NULL DEFAULT ''    -- the last lines of the workload's output, as its agent reports them
);
CREATE INDEX instances_user ON instances(user_id, id);
CREATE INDEX instances_status ON instances(status);
CREATE INDEX instances_node ON instances(node_id, status);

-- GPUs held by live instances: a GPU runs one instance at a time.
CREATE TABLE instance_gpus (
    gpu_uuid    TEXT PRIMARY KEY REFERENCES gpus(uuid),
    instance_id INTEGER NOT NULL REFERENCES instances(id)
);
CREATE INDEX instance_gpus_instance ON instance_gpus(instance_id);

-- GPUs assigned to active reservations.
CREATE TABLE reservation_gpus (
    gpu_uuid       TEXT PRIMARY KEY REFERENCES gpus(uuid),
    reservation_id INTEGER NOT NULL REFERENCES reservations(id)
);
CREATE INDEX reservation_gpus_reservation ON reservation_gpus(reservation_id);

-- Every interruption of a spot instance, for the published rates.
CREATE TABLE interruptions (
    id          INTEGER PRIMARY KEY,
    instance_id INTEGER NOT NULL REFERENCES instances(id),
    user_id     INTEGER NOT NULL REFERENCES users(id),
    model_id    TEXT NOT NULL,
    region_id   TEXT NOT NULL,
    gpus        INTEGER NOT NULL,
    notice_at   INTEGER NOT NULL,
    deadline_at INTEGER NOT NULL,
    reason      TEXT NOT NULL CHECK (reason IN ('reservation', 'on_demand', 'node_failure', 'admin'))
);
CREATE INDEX interruptions_at ON interruptions(model_id, region_id, notice_at);

ALTER TABLE ledger_entries ADD COLUMN instance_id INTEGER REFERENCES instances(id);
-- GPUs an active reservation lacks after a node failure (refunded pro rata).
ALTER TABLE reservations ADD COLUMN short_gpus INTEGER NOT NULL DEFAULT 0;
