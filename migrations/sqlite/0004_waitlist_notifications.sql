-- The waitlist and the notification outbox.

CREATE TABLE waitlist_entries (
    id               INTEGER PRIMARY KEY,
    user_id          INTEGER NOT NULL REFERENCES users(id),
    model_id         TEXT NOT NULL REFERENCES models(id),
    region_id        TEXT NOT NULL REFERENCES regions(id),
    count            INTEGER NOT NULL CHECK (count > 0),
    start_at         INTEGER NOT NULL,
    end_at           INTEGER NOT NULL,
    auto_book        INTEGER NOT NULL DEFAULT 0,
    status           TEXT NOT NULL CHECK (status IN ('waiting', 'offered', 'claimed', 'expired', 'cancelled')),
    created_at       INTEGER NOT NULL,
    offered_at       INTEGER,
    offer_expires_at INTEGER,
    reservation_id   INTEGER REFERENCES reservations(id),
    note             TEXT NOT NULL DEFAULT ''
);
CREATE INDEX waitlist_queue ON waitlist_entries(status, model_id, region_id, id);
CREATE INDEX waitlist_user ON waitlist_entries(user_id, id);

-- Every notification goes through this outbox, written in the transaction of
-- the event that causes it; the dispatcher renders it in the user's
-- language when it sends it. 'app' rows are the in-app list.
CREATE TABLE notifications (
    id              INTEGER PRIMARY KEY,
    user_id         INTEGER NOT NULL REFERENCES users(id),
    kind            TEXT NOT NULL,
    params          TEXT NOT NULL,
    channel         TEXT NOT NULL CHECK (channel IN ('app', 'email', 'sms')),
    recipient       TEXT NOT NULL DEFAULT '',
    status          TEXT NOT NULL CHECK (status IN ('pending', 'sending', 'sent', 'failed')),
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at INTEGER NOT NULL,
    last_error      TEXT NOT NULL DEFAULT '',
    created_at      INTEGER NOT NULL,
    sent_at         INTEGER
);
CREATE INDEX notifications_due ON notifications(status, next_attempt_at);
CREATE INDEX notifications_user ON notifications(user_id, channel, id);

ALTER TABLE users ADD COLUMN notify_email INTEGER NOT NULL DEFAULT 1;
ALTER TABLE users ADD COLUMN notify_sms INTEGER NOT NULL DEFAULT 1;
ALTER TABLE reservations ADD COLUMN reminded_start INTEGER NOT NULL DEFAULT 0;
ALTER TABLE reservations ADD COLUMN reminded_end INTEGER NOT NULL DEFAULT 0;
