-- Volumes: a customer's persistent disk in a region, billed per started
-- hour of its size (billed_until: the end of the last hour charged; carry:
-- what is left of a fen, in 720ths), mounted by instances (instance_volumes)
-- and job tasks (jobs.volumes), reached by the portal through an agent of
-- the region (sessions of kind 'volume'). suspended_at: its owner's
-- balance ran out; it is kept 15 days, then deleted (deleted_at).
CREATE TABLE volumes (
    id            BIGSERIAL PRIMARY KEY,
    user_id       BIGINT NOT NULL REFERENCES users(id),
    name          TEXT NOT NULL,
    region_id     TEXT NOT NULL REFERENCES regions(id),
    size_gib      BIGINT NOT NULL,
    used_bytes    BIGINT NOT NULL DEFAULT 0,
    used_at       BIGINT,
    created_at    BIGINT NOT NULL,
    billed_until  BIGINT NOT NULL,
    carry         BIGINT NOT NULL DEFAULT 0,
    suspended_at  BIGINT,
    warned_at     BIGINT,
    deleted_at    BIGINT
);
CREATE UNIQUE INDEX volumes_name ON volumes(user_id, name) WHERE deleted_at IS NULL;
CREATE INDEX volumes_live ON volumes(billed_until) WHERE deleted_at IS NULL;

CREATE TABLE instance_volumes (
    instance_id BIGINT NOT NULL REFERENCES instances(id),
    volume_id   BIGINT NOT NULL REFERENCES volumes(id),
    mount_path  TEXT NOT NULL,
    PRIMARY KEY (instance_id, volume_id)
);
CREATE INDEX instance_volumes_by_volume ON instance_volumes(volume_id);

-- A job's volumes (JSON [{id, mount_path}]): every task mounts them.
ALTER TABLE jobs ADD COLUMN volumes TEXT NOT NULL DEFAULT '';
-- The user's quota of volume GiB (NULL: the policy's max_volume_gib).
ALTER TABLE users ADD COLUMN max_volume_gib BIGINT;
-- What a node's agent says of its volume root: whether sizes are enforced.
ALTER TABLE nodes ADD COLUMN volume_note TEXT NOT NULL DEFAULT '';
ALTER TABLE nodes ADD COLUMN volume_enforced BIGINT NOT NULL DEFAULT 0;

-- Sessions into a volume have no instance: instance_id becomes optional.
ALTER TABLE sessions ALTER COLUMN instance_id DROP NOT NULL;
ALTER TABLE sessions ADD COLUMN volume_id BIGINT REFERENCES volumes(id);
