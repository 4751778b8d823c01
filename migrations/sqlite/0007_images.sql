-- The image catalog: admin-curated container images instances run in.
-- position keeps the admin's order; the first image is the default.
CREATE TABLE images (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL,
    reference   TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    position    INTEGER NOT NULL,
    created_at  INTEGER NOT NULL
);
INSERT INTO images (id, name, reference, description, position, created_at) VALUES
    ('pytorch-2.5', 'PyTorch 2.5 / CUDA 12.4', 'docker.io/pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime', 'PyTorch 2.5.1 with CUDA 12.4 and cuDNN 9, Python 3.11.', 1, 0),
    ('cuda-12.4', 'CUDA 12.4 base (Ubuntu 22.04)', 'docker.io/nvidia/cuda:12.4.1-base-ubuntu22.04', 'The CUDA runtime only: bring your own framework.', 2, 0);

-- The image an instance was launched with (its reference); empty for
-- instances from before the catalog, which ran in the node's default.
ALTER TABLE instances ADD COLUMN image TEXT NOT NULL DEFAULT '';
