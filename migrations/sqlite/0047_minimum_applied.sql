-- The on-demand minimum a run was billed up to, said on the ended
-- instance's page (issue 50: no surprise charges).
ALTER TABLE instances ADD COLUMN minimum_applied_minutes INTEGER;
