-- One-time tokens that hand a web app's origin (http://<instance>-<port>.<proxy
-- domain>/) to its owner: made by GET /instances/{id}/ports/{port}/open on the
-- portal's origin, good for 60 seconds and once, turned into a cookie for that
-- host alone. Only the token's SHA-256 is kept.
CREATE TABLE app_tokens (
    token_hash  TEXT PRIMARY KEY,
    user_id     INTEGER NOT NULL REFERENCES users(id),
    instance_id INTEGER NOT NULL REFERENCES instances(id),
    port        INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL,
    used_at     INTEGER
);
CREATE INDEX app_tokens_expiry ON app_tokens(expires_at);
