-- Automation (issue 48): signed webhooks through an outbox of their own,
-- and labels on instances, reservations and jobs.

-- A customer's (or a team's: user_id is the account) endpoint. events is
-- the subscribed types joined by commas ("*": all). retry_at backs the
-- whole endpoint off after a failure, so its deliveries go one at a time,
-- oldest first, and a dead endpoint costs one attempt per backoff.
CREATE TABLE webhooks (
    id              BIGSERIAL PRIMARY KEY,
    user_id         BIGINT NOT NULL REFERENCES users(id),
    created_by      BIGINT REFERENCES users(id),
    url             TEXT NOT NULL,
    events          TEXT NOT NULL,
    secret          TEXT NOT NULL,
    created_at      BIGINT NOT NULL,
    deleted_at      BIGINT,
    failures        BIGINT NOT NULL DEFAULT 0,
    retry_at        BIGINT NOT NULL DEFAULT 0,
    failing_noticed BIGINT NOT NULL DEFAULT 0,
    -- due_at: when the deliverer next looks at the endpoint (NULL: nothing
    -- to send); moved ahead while one delivery is in flight.
    due_at          BIGINT
);
CREATE INDEX webhooks_user ON webhooks(user_id) WHERE deleted_at IS NULL;
CREATE INDEX webhooks_due ON webhooks(due_at) WHERE due_at IS NOT NULL;

-- One event, written in the transaction of its cause (only when a
-- webhook of the account listens for its type). data is the object as
-- its GET returns it, at that moment.
CREATE TABLE webhook_events (
    id         BIGSERIAL PRIMARY KEY,
    user_id    BIGINT NOT NULL REFERENCES users(id),
    type       TEXT NOT NULL,
    data       TEXT NOT NULL,
    created_at BIGINT NOT NULL
);

CREATE TABLE webhook_deliveries (
    id              BIGSERIAL PRIMARY KEY,
    webhook_id      BIGINT NOT NULL REFERENCES webhooks(id),
    event_id        BIGINT NOT NULL REFERENCES webhook_events(id),
    status          TEXT NOT NULL CHECK (status IN ('pending', 'sending', 'delivered', 'failed')),
    attempts        BIGINT NOT NULL DEFAULT 0,
    status_code     BIGINT,
    response        TEXT NOT NULL DEFAULT '',
    last_error      TEXT NOT NULL DEFAULT '',
    created_at      BIGINT NOT NULL,
    next_attempt_at BIGINT NOT NULL,
    delivered_at    BIGINT
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries(status, next_attempt_at);
CREATE INDEX webhook_deliveries_webhook ON webhook_deliveries(webhook_id, status, id);

-- Labels: kind is 'instance', 'reservation' or 'job'.
CREATE TABLE object_labels (
    kind      TEXT NOT NULL,
    object_id BIGINT NOT NULL,
    key       TEXT NOT NULL,
    value     TEXT NOT NULL,
    PRIMARY KEY (kind, object_id, key)
);
CREATE INDEX object_labels_match ON object_labels(kind, key, value);
