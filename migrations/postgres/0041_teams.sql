-- Teams (issue 47): one balance, many people. A team owns an account of
-- its own (account_id, a users row nobody signs in as: no password), so
-- its money and what is made for it work as a customer's do.
CREATE TABLE teams (
    id         BIGSERIAL PRIMARY KEY,
    name       TEXT NOT NULL,
    account_id BIGINT NOT NULL UNIQUE REFERENCES users(id),
    created_at BIGINT NOT NULL,
    deleted_at BIGINT
);

CREATE TABLE team_members (
    team_id                 BIGINT NOT NULL REFERENCES teams(id),
    user_id                 BIGINT NOT NULL REFERENCES users(id),
    role                    TEXT NOT NULL CHECK (role IN ('owner', 'admin', 'billing', 'member', 'viewer')),
    monthly_spend_limit_fen BIGINT,
    max_running_gpus        BIGINT,
    joined_at               BIGINT NOT NULL,
    PRIMARY KEY (team_id, user_id)
);
CREATE INDEX team_members_user ON team_members(user_id);

CREATE TABLE team_invitations (
    id          BIGSERIAL PRIMARY KEY,
    team_id     BIGINT NOT NULL REFERENCES teams(id),
    email       TEXT NOT NULL,
    role        TEXT NOT NULL,
    token_hash  TEXT NOT NULL UNIQUE,
    invited_by  BIGINT NOT NULL REFERENCES users(id),
    created_at  BIGINT NOT NULL,
    expires_at  BIGINT NOT NULL,
    accepted_at BIGINT,
    accepted_by BIGINT REFERENCES users(id)
);
CREATE INDEX team_invitations_team ON team_invitations(team_id, id);

-- Who made it, when a member made it for a team (NULL: its owner).
ALTER TABLE instances ADD COLUMN created_by BIGINT;
ALTER TABLE reservations ADD COLUMN created_by BIGINT;
ALTER TABLE jobs ADD COLUMN created_by BIGINT;
ALTER TABLE volumes ADD COLUMN created_by BIGINT;
ALTER TABLE private_images ADD COLUMN created_by BIGINT;
CREATE INDEX instances_created_by ON instances(created_by, status) WHERE created_by IS NOT NULL;

-- A team's own audit trail.
ALTER TABLE audit_log ADD COLUMN team_id BIGINT;
CREATE INDEX audit_log_team ON audit_log(team_id, id) WHERE team_id IS NOT NULL;

-- API tokens for a team (acting only for it) and read-only tokens.
ALTER TABLE api_tokens ADD COLUMN team_id BIGINT;
ALTER TABLE api_tokens ADD COLUMN scope TEXT NOT NULL DEFAULT 'write';

-- Who made what a ledger line charges for (its instance's, reservation's
-- or volume's created_by): members' spend, read by member.
ALTER TABLE ledger_entries ADD COLUMN created_by BIGINT;
CREATE INDEX ledger_member ON ledger_entries(user_id, created_by, at) WHERE created_by IS NOT NULL;

-- The last monthly-limit notice a member had ("2026-12:80"), as users'
-- budget_noticed.
ALTER TABLE team_members ADD COLUMN limit_noticed TEXT NOT NULL DEFAULT '';
