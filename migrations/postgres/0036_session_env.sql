-- env: the locale variables (LANG, LC_*) the SSH client asked its session
-- to have (SetEnv/SendEnv), a JSON list of KEY=value; '' for none.
ALTER TABLE sessions ADD COLUMN env TEXT NOT NULL DEFAULT '';
-- agent_forward: the client asked for its SSH agent (ssh -A); the agent
-- offers the session a socket that reaches it.
ALTER TABLE sessions ADD COLUMN agent_forward BIGINT NOT NULL DEFAULT 0;
-- host: where a forwarded connection goes as the instance reaches it
-- (ssh -D, ssh -L to another host); '' is the instance's own loopback.
ALTER TABLE sessions ADD COLUMN host TEXT NOT NULL DEFAULT '';
