-- No-GPU mode (issue 46): an instance started with count 0 runs on no GPU
-- at the policy's no_gpu_price_per_hour_fen.
ALTER TABLE instances DROP CONSTRAINT instances_count_check;
ALTER TABLE instances ADD CONSTRAINT instances_count_check CHECK (count >= 0);
