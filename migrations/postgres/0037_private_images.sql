-- private_images: a customer's own images, imported from a docker save /
-- OCI archive in one of their volumes (volume_id, path) or saved from an
-- instance's disk (instance_id), by one node of the region (node_id) into
-- the region's image root; saving until that node
-- reports, then ready (size_bytes, billed per started GiB-hour at the
-- volume price from billed_until, carry the fractions of a fen) or failed
-- (error). deleted_at: deleted by its owner; nodes remove their copies.
-- ref_token: its own random tag in the reference nodes load it under.
CREATE TABLE private_images (
    id            BIGSERIAL PRIMARY KEY,
    user_id       BIGINT NOT NULL REFERENCES users(id),
    name          TEXT NOT NULL,
    region_id     TEXT NOT NULL REFERENCES regions(id),
    volume_id     BIGINT REFERENCES volumes(id),
    path          TEXT NOT NULL DEFAULT '',
    ref_token     TEXT NOT NULL DEFAULT '',
    instance_id   BIGINT REFERENCES instances(id),
    node_id       TEXT NOT NULL,
    status        TEXT NOT NULL DEFAULT 'saving',
    error         TEXT NOT NULL DEFAULT '',
    size_bytes    BIGINT NOT NULL DEFAULT 0,
    created_at    BIGINT NOT NULL,
    ready_at      BIGINT,
    billed_until  BIGINT,
    carry         BIGINT NOT NULL DEFAULT 0,
    deleted_at    BIGINT
);
CREATE INDEX private_images_owner ON private_images(user_id, id) WHERE deleted_at IS NULL;
CREATE INDEX private_images_saving ON private_images(node_id) WHERE status = 'saving' AND deleted_at IS NULL;
CREATE INDEX private_images_due ON private_images(billed_until) WHERE billed_until IS NOT NULL;
CREATE INDEX private_images_deleted ON private_images(region_id, deleted_at) WHERE deleted_at IS NOT NULL;
CREATE INDEX private_images_instance ON private_images(instance_id) WHERE instance_id IS NOT NULL AND status = 'saving';
