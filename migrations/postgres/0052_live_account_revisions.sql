-- live_account_revisions names, for each account with a live spot or
-- on-demand run, the state of what the tick sums for it every minute (its
-- live runs' status, stop, notice reason, price, size and start; its
-- balance and credit; whether it was told its balance runs low), so the
-- tick keeps each account's sums between runs and sums again only the
-- accounts that changed (store.accountSums): a placement or an end
-- changes one account, where every account's sums were read each minute.
-- Triggers renew an account's row from a sequence at every such change
-- and remove it when its last live run ends, so the table holds only
-- accounts with live runs.
CREATE TABLE live_account_revisions (user_id BIGINT PRIMARY KEY, revision BIGINT NOT NULL);
CREATE SEQUENCE live_account_revision_numbers;
INSERT INTO live_account_revisions (user_id, revision)
    SELECT user_id, nextval('live_account_revision_numbers') FROM (SELECT DISTINCT user_id FROM instances
        WHERE kind IN ('spot', 'on_demand') AND status IN ('pending', 'running', 'interrupting')) live;

-- renew_live_account: the account's row renewed while it has a live run,
-- removed once it has none.
CREATE FUNCTION renew_live_account(account BIGINT) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM instances WHERE user_id = account AND kind IN ('spot', 'on_demand') AND status IN ('pending', 'running', 'interrupting')) THEN
        INSERT INTO live_account_revisions (user_id, revision) VALUES (account, nextval('live_account_revision_numbers'))
            ON CONFLICT (user_id) DO UPDATE SET revision = excluded.revision;
    ELSE
        DELETE FROM live_account_revisions WHERE user_id = account;
    END IF;
END $$;

-- A live run added or changed: its account's row renewed (the run itself
-- is live, so the account keeps a row). A run that stopped being live (or
-- changed hands): its account's row renewed, or removed with the
-- account's last live run.
CREATE FUNCTION renew_live_account_of_instance() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP <> 'DELETE' AND NEW.kind IN ('spot', 'on_demand') AND NEW.status IN ('pending', 'running', 'interrupting') THEN
        INSERT INTO live_account_revisions (user_id, revision) VALUES (NEW.user_id, nextval('live_account_revision_numbers'))
            ON CONFLICT (user_id) DO UPDATE SET revision = excluded.revision;
    END IF;
    IF TG_OP <> 'INSERT' AND OLD.kind IN ('spot', 'on_demand') AND OLD.status IN ('pending', 'running', 'interrupting')
            AND (TG_OP = 'DELETE' OR NOT (NEW.kind IN ('spot', 'on_demand') AND NEW.status IN ('pending', 'running', 'interrupting'))
                OR OLD.user_id IS DISTINCT FROM NEW.user_id) THEN
        PERFORM renew_live_account(OLD.user_id);
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER live_account_revisions_instance_insert AFTER INSERT ON instances
FOR EACH ROW EXECUTE FUNCTION renew_live_account_of_instance();
CREATE TRIGGER live_account_revisions_instance_update AFTER UPDATE OF status, stop_requested_at, interrupt_reason, price_fen, count, started_at, kind, user_id ON instances
FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status OR OLD.stop_requested_at IS DISTINCT FROM NEW.stop_requested_at
    OR OLD.interrupt_reason IS DISTINCT FROM NEW.interrupt_reason OR OLD.price_fen IS DISTINCT FROM NEW.price_fen
    OR OLD.count IS DISTINCT FROM NEW.count OR OLD.started_at IS DISTINCT FROM NEW.started_at
    OR OLD.kind IS DISTINCT FROM NEW.kind OR OLD.user_id IS DISTINCT FROM NEW.user_id)
EXECUTE FUNCTION renew_live_account_of_instance();
CREATE TRIGGER live_account_revisions_instance_delete AFTER DELETE ON instances
FOR EACH ROW EXECUTE FUNCTION renew_live_account_of_instance();

-- An account's balance, credit, or low-balance note: its row renewed if
-- it has one.
CREATE FUNCTION renew_live_account_of_money() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_TABLE_NAME = 'users' THEN
        UPDATE live_account_revisions SET revision = nextval('live_account_revision_numbers') WHERE user_id = NEW.id;
        RETURN NULL;
    END IF;
    IF TG_OP <> 'INSERT' THEN
        UPDATE live_account_revisions SET revision = nextval('live_account_revision_numbers') WHERE user_id = OLD.user_id;
    END IF;
    IF TG_OP <> 'DELETE' THEN
        UPDATE live_account_revisions SET revision = nextval('live_account_revision_numbers') WHERE user_id = NEW.user_id;
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER live_account_revisions_account_change AFTER INSERT OR DELETE ON accounts
FOR EACH ROW EXECUTE FUNCTION renew_live_account_of_money();
CREATE TRIGGER live_account_revisions_account_update AFTER UPDATE OF balance_fen, credit_limit_fen, user_id ON accounts
FOR EACH ROW WHEN (OLD.balance_fen IS DISTINCT FROM NEW.balance_fen OR OLD.credit_limit_fen IS DISTINCT FROM NEW.credit_limit_fen OR OLD.user_id IS DISTINCT FROM NEW.user_id)
EXECUTE FUNCTION renew_live_account_of_money();
CREATE TRIGGER live_account_revisions_low_noted AFTER UPDATE OF low_balance_noted_at ON users
FOR EACH ROW WHEN ((OLD.low_balance_noted_at IS NULL) IS DISTINCT FROM (NEW.low_balance_noted_at IS NULL))
EXECUTE FUNCTION renew_live_account_of_money();
