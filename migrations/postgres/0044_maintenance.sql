-- Maintenance windows (issue 49). A window's GPUs count in
-- hourly_usage.reserved for its hours — as if the operator had booked
-- them — so every admission rule (bookings, the waitlist, offerings,
-- on-demand beside the book) sees them taken; maintenance_gpus keeps how
-- many, to give them back when the window ends early.
CREATE TABLE maintenance_windows (
    id         BIGSERIAL PRIMARY KEY,
    node_id    TEXT,
    region_id  TEXT NOT NULL,
    start_at   BIGINT NOT NULL,
    end_at     BIGINT NOT NULL,
    reason     TEXT NOT NULL,
    created_by BIGINT,
    created_at BIGINT NOT NULL,
    ended_at   BIGINT,
    affected   TEXT NOT NULL DEFAULT ''
);
CREATE INDEX maintenance_windows_end ON maintenance_windows(end_at);

CREATE TABLE maintenance_gpus (
    window_id BIGINT NOT NULL REFERENCES maintenance_windows(id),
    model_id  TEXT NOT NULL,
    region_id TEXT NOT NULL,
    gpus      BIGINT NOT NULL,
    PRIMARY KEY (window_id, model_id)
);
