-- An instance restarted after its node stopped answering waits until that
-- node confirms the old attempt gone (or is fenced): two copies must never
-- run on one checkpoint directory. unconfirmed_since is real time.
ALTER TABLE instances ADD COLUMN unconfirmed_node TEXT;
ALTER TABLE instances ADD COLUMN unconfirmed_since INTEGER;
