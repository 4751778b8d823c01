-- Calendar revisions of a reservation: SEQUENCE and LAST-MODIFIED of its
-- .ics (RFC 5545 §3.8.7.4), bumped by every change a calendar must take
-- (a cancellation, an extension).
ALTER TABLE reservations ADD COLUMN sequence INTEGER NOT NULL DEFAULT 0;
ALTER TABLE reservations ADD COLUMN modified_at BIGINT;
