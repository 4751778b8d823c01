-- Real providers: a top-up keeps its provider's reference (a Stripe
-- Checkout Session) and the page the payer pays on, and what of it was
-- refunded.
ALTER TABLE topups ADD COLUMN provider_ref TEXT;
ALTER TABLE topups ADD COLUMN pay_url TEXT;
ALTER TABLE topups ADD COLUMN refunded_fen BIGINT NOT NULL DEFAULT 0;
CREATE INDEX topups_provider_ref ON topups(provider, provider_ref);

-- A customer asks for unused balance back; an administrator approves it,
-- and it goes back through the provider to the payments it came from.
CREATE TABLE refund_requests (
    id          BIGSERIAL PRIMARY KEY,
    user_id     BIGINT NOT NULL REFERENCES users(id),
    amount_fen  BIGINT NOT NULL CHECK (amount_fen > 0),
    note        TEXT NOT NULL DEFAULT '',
    status      TEXT NOT NULL CHECK (status IN ('requested', 'refunding', 'refunded', 'rejected', 'failed')),
    created_at  BIGINT NOT NULL,
    decided_by  BIGINT REFERENCES users(id),
    decided_at  BIGINT,
    refs        TEXT NOT NULL DEFAULT '',
    error       TEXT NOT NULL DEFAULT ''
);
CREATE INDEX refund_requests_user ON refund_requests(user_id, id);
CREATE INDEX refund_requests_status ON refund_requests(status, id);
