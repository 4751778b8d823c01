-- Batch jobs: N independent tasks run as spot (or hybrid) instances; an
-- interrupted task is queued again and resumes from its own checkpoint
-- directory (checkpoint_key job-<id>-task-<index>, kept across attempts).
CREATE TABLE jobs (
    id                INTEGER PRIMARY KEY,
    user_id           INTEGER NOT NULL REFERENCES users(id),
    name              TEXT NOT NULL DEFAULT '',
    model_id          TEXT NOT NULL REFERENCES models(id),
    region_id         TEXT NOT NULL REFERENCES regions(id),
    gpus_per_task     INTEGER NOT NULL CHECK (gpus_per_task > 0),
    task_count        INTEGER NOT NULL CHECK (task_count > 0),
    command           TEXT NOT NULL,
    image             TEXT NOT NULL DEFAULT '',
    kind              TEXT NOT NULL CHECK (kind IN ('spot', 'hybrid')),
    max_parallel      INTEGER NOT NULL CHECK (max_parallel > 0),
    on_demand_workers INTEGER NOT NULL DEFAULT 0,
    max_attempts      INTEGER NOT NULL CHECK (max_attempts > 0),
    list_price_fen    INTEGER NOT NULL,           -- per GPU-hour on-demand at submission: what the work would cost on-demand
    status            TEXT NOT NULL CHECK (status IN ('queued', 'running', 'succeeded', 'failed', 'cancelled')),
    created_at        INTEGER NOT NULL,
    ended_at          INTEGER,
    unpaid_noted_at   INTEGER                           -- its owner was told it waits for money (once until it runs again)
);
CREATE INDEX jobs_user ON jobs(user_id, id);
CREATE INDEX jobs_status ON jobs(status);

CREATE TABLE job_tasks (
    job_id        INTEGER NOT NULL REFERENCES jobs(id),
    task_index    INTEGER NOT NULL,
    status        TEXT NOT NULL CHECK (status IN ('queued', 'running', 'succeeded', 'failed', 'cancelled')),
    attempts      INTEGER NOT NULL DEFAULT 0,
    failures      INTEGER NOT NULL DEFAULT 0,
    interruptions INTEGER NOT NULL DEFAULT 0,
    instance_id   INTEGER REFERENCES instances(id),
    exit_code     INTEGER,
    started_at    INTEGER,
    finished_at   INTEGER,
    duration_s    INTEGER,                          -- the succeeding attempt's run time, for the ETA
    PRIMARY KEY (job_id, task_index)
);
CREATE INDEX job_tasks_queued ON job_tasks(status, job_id, task_index);

ALTER TABLE instances ADD COLUMN job_id INTEGER REFERENCES jobs(id);
ALTER TABLE instances ADD COLUMN task_index INTEGER;
CREATE INDEX instances_job ON instances(job_id, task_index);
