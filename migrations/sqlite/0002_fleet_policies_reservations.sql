-- The fleet (nodes and GPUs), the policies document, reservations with the
-- hourly capacity ledger that keeps them from overbooking, the money ledger
-- and idempotency keys. Times are unix seconds (UTC); money is integer fen.

CREATE TABLE nodes (
    id                TEXT PRIMARY KEY,
    hostname          TEXT NOT NULL,
    region_id         TEXT NOT NULL REFERENCES regions(id),
    token_hash        TEXT UNIQUE,
    online            INTEGER NOT NULL DEFAULT 1,
    drain             INTEGER NOT NULL DEFAULT 0,
    last_heartbeat_at INTEGER,
    created_at        INTEGER NOT NULL
);

CREATE TABLE gpus (
    uuid                TEXT PRIMARY KEY,
    node_id             TEXT NOT NULL REFERENCES nodes(id),
    idx                 INTEGER NOT NULL,
    model_id            TEXT NOT NULL REFERENCES models(id),
    name                TEXT NOT NULL,
    healthy             INTEGER NOT NULL DEFAULT 1,
    memory_total_mib    INTEGER NOT NULL DEFAULT 0,
    memory_used_mib     INTEGER NOT NULL DEFAULT 0,
    utilization_percent INTEGER NOT NULL DEFAULT 0,
    temperature_c       INTEGER NOT NULL DEFAULT 0,
    power_w             INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX gpus_node ON gpus(node_id, idx);

-- Healthy GPUs on online, non-draining nodes per model and region:
-- recomputed whenever the fleet changes, read by every availability query.
CREATE TABLE capacity (
    model_id     TEXT NOT NULL,
    region_id    TEXT NOT NULL,
    healthy_gpus INTEGER NOT NULL,
    PRIMARY KEY (model_id, region_id)
);

-- The policies document (DESIGN §6), one row.
CREATE TABLE policies (
    id         INTEGER PRIMARY KEY CHECK (id = 1),
    document   TEXT NOT NULL,
    updated_at INTEGER NOT NULL,
    updated_by INTEGER REFERENCES users(id)
);

CREATE TABLE reservations (
    id              INTEGER PRIMARY KEY,
    user_id         INTEGER NOT NULL REFERENCES users(id),
    model_id        TEXT NOT NULL REFERENCES models(id),
    region_id       TEXT NOT NULL REFERENCES regions(id),
    count           INTEGER NOT NULL CHECK (count > 0),
    start_at        INTEGER NOT NULL,
    end_at          INTEGER NOT NULL,
    status          TEXT NOT NULL CHECK (status IN ('confirmed', 'active', 'completed', 'cancelled')),
    price_fen       INTEGER NOT NULL,
    quote_json      TEXT NOT NULL,
    tiers_json      TEXT NOT NULL,
    created_at      INTEGER NOT NULL,
    cancelled_at    INTEGER,
    fee_fen         INTEGER,
    refund_fen      INTEGER,
    late_cancel     INTEGER NOT NULL DEFAULT 0,
    CHECK (end_at > start_at)
);
CREATE INDEX reservations_user ON reservations(user_id, start_at);
CREATE INDEX reservations_status_start ON reservations(status, start_at);
CREATE INDEX reservations_late_cancels ON reservations(user_id, cancelled_at) WHERE late_cancel = 1;

-- GPUs reserved (confirmed and active reservations, held waitlist offers)
-- per model, region and hour. Booking checks and updates only the rows of
-- its own hours, so its cost does not grow with the size of the book.
CREATE TABLE hourly_usage (
    model_id  TEXT NOT NULL,
    region_id TEXT NOT NULL,
    hour      INTEGER NOT NULL,
    reserved  INTEGER NOT NULL DEFAULT 0 CHECK (reserved >= 0),
    PRIMARY KEY (model_id, region_id, hour)
) WITHOUT ROWID;

-- Charges (positive) and refunds (negative) per user.
CREATE TABLE ledger_entries (
    id             INTEGER PRIMARY KEY,
    user_id        INTEGER NOT NULL REFERENCES users(id),
    at             INTEGER NOT NULL,
    kind           TEXT NOT NULL,
    amount_fen     INTEGER NOT NULL,
    reservation_id INTEGER REFERENCES reservations(id),
    description    TEXT NOT NULL
);
CREATE INDEX ledger_user ON ledger_entries(user_id, at);

-- Idempotency-Key: the first answer to a creating POST, per user and key.
-- status 0 marks a request still in progress (or one whose process died
-- mid-way): it is never run a second time.
CREATE TABLE idempotency_keys (
    user_id     INTEGER NOT NULL REFERENCES users(id),
    key         TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    status      INTEGER NOT NULL DEFAULT 0,
    body        TEXT NOT NULL DEFAULT '',
    created_at  INTEGER NOT NULL,
    PRIMARY KEY (user_id, key)
);
