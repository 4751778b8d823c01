-- How many heartbeats in a row a running instance's node has not reported
-- it, and when (business time) it was first missed: after a few the
-- instance is ended, billed to then (its agent lost it).
ALTER TABLE instances ADD COLUMN unreported_heartbeats INTEGER NOT NULL DEFAULT 0;
ALTER TABLE instances ADD COLUMN unreported_at INTEGER;
