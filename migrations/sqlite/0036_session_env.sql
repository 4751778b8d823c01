-- env: the locale variables (LANG, LC_*) the SSH client asked its session
-- to have (SetEnv/SendEnv), a JSON list of KEY=value; '' for none.
ALTER TABLE sessions ADD COLUMN env TEXT NOT NULL DEFAULT '';
