-- Money: a prepaid balance per user. The ledger stays the one source of
-- truth (amount_fen > 0 takes money out of the balance: a charge, a fee;
-- < 0 puts it in: a top-up, a credit, a refund); accounts caches
-- balance = −Σ amount_fen, updated in the same transaction as every entry.
CREATE TABLE accounts (
    user_id          INTEGER PRIMARY KEY REFERENCES users(id),
    balance_fen      INTEGER NOT NULL DEFAULT 0,
    credit_limit_fen INTEGER NOT NULL DEFAULT 0,  -- post-paid accounts may go this far below zero
    booked_gpu_hours INTEGER NOT NULL DEFAULT 0   -- in reservations not ended yet, for the quota
);
INSERT INTO accounts (user_id, balance_fen, booked_gpu_hours)
    SELECT u.id, -coalesce((SELECT sum(l.amount_fen) FROM ledger_entries l WHERE l.user_id = u.id), 0),
        coalesce((SELECT sum(r.count * (r.end_at - r.start_at) / 3600) FROM reservations r WHERE r.user_id = u.id AND r.status IN ('confirmed', 'active')), 0)
    FROM users u;
-- What a user runs now (held money, running-GPU quota).
CREATE INDEX instances_user_status ON instances(user_id, status);

-- Per-user quota overrides (NULL: the policy's default), and an account an
-- admin disabled (it cannot log in; its instances are stopped).
ALTER TABLE users ADD COLUMN max_running_gpus INTEGER;
ALTER TABLE users ADD COLUMN max_booked_gpu_hours INTEGER;
ALTER TABLE users ADD COLUMN max_waitlist_entries INTEGER;
ALTER TABLE users ADD COLUMN disabled_at INTEGER;
-- When the user was told their balance runs out soon (once per episode).
ALTER TABLE users ADD COLUMN low_balance_noted_at INTEGER;

-- Money in through a payment provider: pending until the provider's signed
-- webhook says paid (credited once per payment_id), or expired.
CREATE TABLE topups (
    id          INTEGER PRIMARY KEY,
    user_id     INTEGER NOT NULL REFERENCES users(id),
    amount_fen  INTEGER NOT NULL CHECK (amount_fen > 0),
    provider    TEXT NOT NULL,
    status      TEXT NOT NULL CHECK (status IN ('pending', 'paid', 'expired')),
    payment_id  TEXT UNIQUE,
    created_at  INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL,
    paid_at     INTEGER
);
CREATE INDEX topups_user ON topups(user_id, id);
CREATE INDEX topups_pending ON topups(status, expires_at);

ALTER TABLE ledger_entries ADD COLUMN topup_id INTEGER REFERENCES topups(id);
CREATE INDEX ledger_user_kind ON ledger_entries(user_id, kind, at);
