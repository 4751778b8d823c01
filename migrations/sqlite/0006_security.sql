-- Sessions carry the user's session version; logout, a password change or
-- a promotion bumps it, ending every session of that user.
ALTER TABLE users ADD COLUMN session_version INTEGER NOT NULL DEFAULT 0;

-- One-time password reset links (emailed, or issued by an admin when no
-- email is configured). Only the token's hash is kept.
CREATE TABLE password_resets (
    token_hash TEXT PRIMARY KEY,
    user_id    INTEGER NOT NULL REFERENCES users(id),
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    used_at    INTEGER,
    created_by INTEGER REFERENCES users(id)
);
CREATE INDEX password_resets_user ON password_resets(user_id);

-- Enrollment tokens expire (NULL: issued before expiry existed; they count
-- as expiring a day after creation).
ALTER TABLE enrollment_tokens ADD COLUMN expires_at INTEGER;

-- Node token rotation: an admin asks for it, the agent fetches a new token
-- (kept as next_token_hash) and the first request made with it retires the
-- old one. A revoked node token is replaced by an unusable hash.
ALTER TABLE nodes ADD COLUMN next_token_hash TEXT;
ALTER TABLE nodes ADD COLUMN rotate_token INTEGER NOT NULL DEFAULT 0;
ALTER TABLE nodes ADD COLUMN token_revoked_at INTEGER;
ALTER TABLE nodes ADD COLUMN token_rotated_at INTEGER;
CREATE UNIQUE INDEX nodes_next_token ON nodes(next_token_hash);

-- A GPU an ended instance's processes still hold (its agent reported
-- gpus_free = false) is out of service until the node reports it idle:
-- nobody else gets it meanwhile, and admins see which instance left it busy.
ALTER TABLE gpus ADD COLUMN busy_after_instance INTEGER;
