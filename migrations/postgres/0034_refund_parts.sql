-- refund_parts: each share of an approved refund, one per top-up it goes
-- back to, kept from the approval on. A share whose outcome the provider
-- did not give (a timeout, a 5xx) stays pending: it is asked again with
-- the same idempotency key and read back, by the retry and the provider's
-- webhooks, and a crash between the ask and the answer loses nothing.
-- Only an explicit refusal puts its money back into the balance.
CREATE TABLE refund_parts (
  refund_id BIGINT NOT NULL REFERENCES refund_requests(id),
  topup_id BIGINT NOT NULL REFERENCES topups(id),
  provider TEXT NOT NULL,
  payment_id TEXT NOT NULL,
  amount_fen BIGINT NOT NULL,
  status TEXT NOT NULL DEFAULT 'pending',
  ref TEXT NOT NULL DEFAULT '',
  error TEXT NOT NULL DEFAULT '',
  attempts INTEGER NOT NULL DEFAULT 0,
  updated_at BIGINT NOT NULL,
  PRIMARY KEY (refund_id, topup_id)
);
CREATE INDEX refund_parts_pending ON refund_parts(updated_at) WHERE status = 'pending';
