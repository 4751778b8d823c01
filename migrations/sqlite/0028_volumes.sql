-- Volumes: a customer's persistent disk in a region, billed per started
-- hour of its size (billed_until: the end of the last hour charged; carry:
-- what is left of a fen, in 720ths), mounted by instances (instance_volumes)
-- and job tasks (jobs.volumes), reached by the portal through an agent of
-- the region (sessions of kind 'volume'). suspended_at: its owner's
-- balance ran out; it is kept 15 days, then deleted (deleted_at).
CREATE TABLE volumes (
    id            INTEGER PRIMARY KEY,
    user_id       INTEGER NOT NULL REFERENCES users(id),
    name          TEXT NOT NULL,
    region_id     TEXT NOT NULL REFERENCES regions(id),
    size_gib      INTEGER NOT NULL,
    used_bytes    INTEGER NOT NULL DEFAULT 0,
    used_at       INTEGER,
    created_at    INTEGER NOT NULL,
    billed_until  INTEGER NOT NULL,
    carry         INTEGER NOT NULL DEFAULT 0,
    suspended_at  INTEGER,
    warned_at     INTEGER,
    deleted_at    INTEGER
);
CREATE UNIQUE INDEX volumes_name ON volumes(user_id, name) WHERE deleted_at IS NULL;
CREATE INDEX volumes_live ON volumes(billed_until) WHERE deleted_at IS NULL;

CREATE TABLE instance_volumes (
    instance_id INTEGER NOT NULL REFERENCES instances(id),
    volume_id   INTEGER NOT NULL REFERENCES volumes(id),
    mount_path  TEXT NOT NULL,
    PRIMARY KEY (instance_id, volume_id)
);
CREATE INDEX instance_volumes_by_volume ON instance_volumes(volume_id);

-- A job's volumes (JSON [{id, mount_path}]): every task mounts them.
ALTER TABLE jobs ADD COLUMN volumes TEXT NOT NULL DEFAULT '';
-- The user's quota of volume GiB (NULL: the policy's max_volume_gib).
ALTER TABLE users ADD COLUMN max_volume_gib INTEGER;
-- What a node's agent says of its volume root: whether sizes are enforced.
ALTER TABLE nodes ADD COLUMN volume_note TEXT NOT NULL DEFAULT '';
ALTER TABLE nodes ADD COLUMN volume_enforced INTEGER NOT NULL DEFAULT 0;

-- Sessions into a volume have no instance: instance_id becomes optional.
CREATE TABLE sessions_new (
    id           TEXT PRIMARY KEY,
    instance_id  INTEGER REFERENCES instances(id),
    volume_id    INTEGER REFERENCES volumes(id),
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
INSERT INTO sessions_new (id, instance_id, user_id, node_id, kind, command, port, tty, grp, url, opened_at, connected_at, seen_at, closed_at)
    SELECT id, instance_id, user_id, node_id, kind, command, port, tty, grp, url, opened_at, connected_at, seen_at, closed_at FROM sessions;
DROP TABLE sessions;
ALTER TABLE sessions_new RENAME TO sessions;
CREATE INDEX sessions_open_by_node ON sessions(node_id) WHERE closed_at IS NULL;
CREATE INDEX sessions_open_by_user ON sessions(user_id) WHERE closed_at IS NULL;
CREATE INDEX sessions_by_instance ON sessions(instance_id);
