-- Accounts, API tokens, site settings, the catalog and the audit log.
-- Times are unix seconds (UTC); money is integer fen.

CREATE TABLE settings (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

CREATE TABLE users (
    id            INTEGER PRIMARY KEY,
    email         TEXT NOT NULL UNIQUE,
    name          TEXT NOT NULL,
    phone         TEXT NOT NULL DEFAULT '',
    password_hash TEXT NOT NULL,
    role          TEXT NOT NULL DEFAULT 'customer' CHECK (role IN ('customer', 'admin')),
    lang          TEXT NOT NULL DEFAULT '',
    created_at    INTEGER NOT NULL
);

CREATE TABLE api_tokens (
    id           INTEGER PRIMARY KEY,
    user_id      INTEGER NOT NULL REFERENCES users(id),
    name         TEXT NOT NULL,
    prefix       TEXT NOT NULL,
    token_hash   TEXT NOT NULL UNIQUE,
    created_at   INTEGER NOT NULL,
    last_used_at INTEGER,
    revoked_at   INTEGER
);
CREATE INDEX api_tokens_user ON api_tokens(user_id);

CREATE TABLE models (
    id                    TEXT PRIMARY KEY,
    name                  TEXT NOT NULL,
    memory_gib            INTEGER NOT NULL,
    list_price_fen        INTEGER NOT NULL CHECK (list_price_fen > 0),
    sort_order            INTEGER NOT NULL DEFAULT 0
);

CREATE TABLE regions (
    id        TEXT PRIMARY KEY,
    name      TEXT NOT NULL,
    time_zone TEXT NOT NULL
);

INSERT INTO models (id, name, memory_gib, list_price_fen, sort_order) VALUES
    ('a100-80g', 'NVIDIA A100 80GB', 80, 800, 1),
    ('h100-80g', 'NVIDIA H100 80GB', 80, 2000, 2);
INSERT INTO regions (id, name, time_zone) VALUES
    ('cd-1', 'Chengdu 1', 'Asia/Shanghai');

-- Every admin change and every fee-bearing cancellation (DESIGN §8).
CREATE TABLE audit_log (
    id        INTEGER PRIMARY KEY,
    at        INTEGER NOT NULL,
    actor_id  INTEGER REFERENCES users(id),
    action    TEXT NOT NULL,
    subject   TEXT NOT NULL,
    old_value TEXT NOT NULL DEFAULT '',
    new_value TEXT NOT NULL DEFAULT ''
);
CREATE INDEX audit_log_at ON audit_log(at);
