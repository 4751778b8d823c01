-- Customers' SSH public keys, for the SSH gateway (one authorized_keys
-- line each, its fingerprint as ssh-keygen -l prints it).
CREATE TABLE ssh_keys (
    id          BIGSERIAL PRIMARY KEY,
    user_id     BIGINT NOT NULL REFERENCES users(id),
    name        TEXT NOT NULL,
    key_type    TEXT NOT NULL,
    public_key  TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    UNIQUE (user_id, fingerprint)
);
CREATE INDEX ssh_keys_fingerprint ON ssh_keys(fingerprint);
