-- tick_failures: a scheduler decision that failed (a reservation whose
-- launch names a suspended volume, a placement that hit a broken row…).
-- The tick rolls that one decision back to its savepoint, records it here
-- and applies the rest: one customer's bad data never halts the tick for
-- others (DESIGN §8). One row per decision and subject; a decision that
-- keeps failing bumps times and last_at (its owner is told only once).
CREATE TABLE tick_failures (
  id INTEGER PRIMARY KEY,
  step TEXT NOT NULL,
  subject TEXT NOT NULL,
  user_id INTEGER REFERENCES users(id),
  error TEXT NOT NULL,
  first_at INTEGER NOT NULL,
  last_at INTEGER NOT NULL,
  times INTEGER NOT NULL DEFAULT 1,
  UNIQUE (step, subject)
);
CREATE INDEX tick_failures_last ON tick_failures(last_at);
