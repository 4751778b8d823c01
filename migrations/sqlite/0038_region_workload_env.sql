-- workload_env: variables every workload of the region gets, set by the
-- admins (a package mirror, a proxy: PIP_INDEX_URL, HTTPS_PROXY…) and
-- shown to customers; a JSON object, '' for none.
ALTER TABLE regions ADD COLUMN workload_env TEXT NOT NULL DEFAULT '';
