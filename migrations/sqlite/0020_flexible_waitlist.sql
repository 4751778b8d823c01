-- A flexible waitlist entry asks for duration_hours somewhere in
-- [start_at, end_at) rather than that exact window; 0 is an exact entry.
ALTER TABLE waitlist_entries ADD COLUMN duration_hours INTEGER NOT NULL DEFAULT 0;
