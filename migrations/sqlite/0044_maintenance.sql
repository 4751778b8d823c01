-- Maintenance windows (issue 49). A window's GPUs count in
-- hourly_usage.reserved for its hours — as if the operator had booked
-- them — so every admission rule (bookings, the waitlist, offerings,
-- on-demand beside the book) sees them taken; maintenance_gpus keeps how
-- many, to give them back when the window ends early.
CREATE TABLE maintenance_windows (
    id         INTEGER PRIMARY KEY,
    node_id    TEXT,
    region_id  TEXT NOT NULL,
    start_at   INTEGER NOT NULL,
    end_at     INTEGER NOT NULL,
    reason     TEXT NOT NULL,
    created_by INTEGER,
    created_at INTEGER NOT NULL,
    ended_at   INTEGER,
    affected   TEXT NOT NULL DEFAULT ''
);
CREATE INDEX maintenance_windows_end ON maintenance_windows(end_at);

CREATE TABLE maintenance_gpus (
    window_id INTEGER NOT NULL REFERENCES maintenance_windows(id),
    model_id  TEXT NOT NULL,
    region_id TEXT NOT NULL,
    gpus      INTEGER NOT NULL,
    PRIMARY KEY (window_id, model_id)
);
