-- Interactive sessions into running instances (SSH, SFTP, forwarded
-- ports, the web terminal): one row per stream the node's agent connects
-- out for. A row is open while closed_at is NULL and the portal holding
-- the customer's end has marked it seen lately (seen_at).
CREATE TABLE sessions (
    id           TEXT PRIMARY KEY,
    instance_id  INTEGER NOT NULL REFERENCES instances(id),
    user_id      INTEGER NOT NULL REFERENCES users(id),
    node_id      TEXT NOT NULL,
    kind         TEXT NOT NULL,
    command      TEXT NOT NULL DEFAULT '',
    port         INTEGER NOT NULL DEFAULT 0,
    tty          TEXT NOT NULL DEFAULT '',
    grp          TEXT NOT NULL,
    url          TEXT NOT NULL DEFAULT '',
    opened_at    INTEGER NOT NULL,
    connected_at INTEGER,
    seen_at      INTEGER NOT NULL,
    closed_at    INTEGER
);
CREATE INDEX sessions_open_by_node ON sessions(node_id) WHERE closed_at IS NULL;
CREATE INDEX sessions_open_by_user ON sessions(user_id) WHERE closed_at IS NULL;
CREATE INDEX sessions_by_instance ON sessions(instance_id);
