-- A customer's monthly budget (0: none) and the last budget notice sent,
-- as "2026-12:80", so each level is told once a month.
ALTER TABLE users ADD COLUMN monthly_budget_fen BIGINT NOT NULL DEFAULT 0;
ALTER TABLE users ADD COLUMN budget_noticed TEXT NOT NULL DEFAULT '';
-- The tick reads the accounts with a budget every run: only those.
CREATE INDEX users_with_budget ON users(id) WHERE monthly_budget_fen > 0;
