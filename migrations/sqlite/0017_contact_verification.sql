-- Email and phone are verified (a link, a code) before anything but the
-- verification itself is sent to them. Accounts that existed before are
-- taken as verified: they were in use.
ALTER TABLE users ADD COLUMN email_verified_at INTEGER;
ALTER TABLE users ADD COLUMN phone_verified_at INTEGER;
ALTER TABLE users ADD COLUMN phone_code_hash TEXT;
ALTER TABLE users ADD COLUMN phone_code_expires_at INTEGER;
ALTER TABLE users ADD COLUMN phone_code_tries INTEGER NOT NULL DEFAULT 0;
UPDATE users SET email_verified_at = created_at, phone_verified_at = CASE WHEN phone <> '' THEN created_at END;

CREATE TABLE email_verifications (
    token_hash TEXT PRIMARY KEY,
    user_id    INTEGER NOT NULL REFERENCES users(id),
    email      TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    used_at    INTEGER
);
CREATE INDEX email_verifications_user ON email_verifications(user_id);
