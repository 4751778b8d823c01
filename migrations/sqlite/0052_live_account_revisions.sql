-- live_account_revisions names, for each account with a live spot or
-- on-demand run, the state of what the tick sums for it every minute (its
-- live runs' status, stop, notice reason, price, size and start; its
-- balance and credit; whether it was told its balance runs low), so the
-- tick keeps each account's sums between runs and sums again only the
-- accounts that changed (store.accountSums): a placement or an end
-- changes one account, where every account's sums were read each minute.
-- Triggers renew an account's row at every such change and remove it when
-- its last live run ends, so the table holds only accounts with live runs.
CREATE TABLE live_account_revisions (user_id INTEGER PRIMARY KEY, revision INTEGER NOT NULL);
INSERT INTO live_account_revisions (user_id, revision)
    SELECT DISTINCT user_id, 1 FROM instances WHERE kind IN ('spot', 'on_demand') AND status IN ('pending', 'running', 'interrupting');
UPDATE live_account_revisions SET revision = random();

CREATE TRIGGER live_account_revisions_insert AFTER INSERT ON instances
WHEN NEW.kind IN ('spot', 'on_demand') AND NEW.status IN ('pending', 'running', 'interrupting')
BEGIN
    INSERT INTO live_account_revisions (user_id, revision) VALUES (NEW.user_id, random())
        ON CONFLICT (user_id) DO UPDATE SET revision = excluded.revision;
END;

-- A live run changed: its account's row renewed (one upsert: the run
-- itself is live, so the account has a row to keep).
CREATE TRIGGER live_account_revisions_update AFTER UPDATE OF status, stop_requested_at, interrupt_reason, price_fen, count, started_at, kind, user_id ON instances
WHEN NEW.kind IN ('spot', 'on_demand') AND NEW.status IN ('pending', 'running', 'interrupting')
    AND (OLD.status IS NOT NEW.status OR OLD.stop_requested_at IS NOT NEW.stop_requested_at OR OLD.interrupt_reason IS NOT NEW.interrupt_reason
        OR OLD.price_fen IS NOT NEW.price_fen OR OLD.count IS NOT NEW.count OR OLD.started_at IS NOT NEW.started_at
        OR OLD.kind IS NOT NEW.kind OR OLD.user_id IS NOT NEW.user_id)
BEGIN
    INSERT INTO live_account_revisions (user_id, revision) VALUES (NEW.user_id, random())
        ON CONFLICT (user_id) DO UPDATE SET revision = excluded.revision;
END;

-- A run stopped being live (or changed hands): its account's row renewed,
-- or removed with the account's last live run.
CREATE TRIGGER live_account_revisions_leave AFTER UPDATE OF status, kind, user_id ON instances
WHEN OLD.kind IN ('spot', 'on_demand') AND OLD.status IN ('pending', 'running', 'interrupting')
    AND (NOT (NEW.kind IN ('spot', 'on_demand') AND NEW.status IN ('pending', 'running', 'interrupting')) OR OLD.user_id IS NOT NEW.user_id)
BEGIN
    UPDATE live_account_revisions SET revision = random() WHERE user_id = OLD.user_id;
    DELETE FROM live_account_revisions WHERE user_id = OLD.user_id
        AND NOT EXISTS (SELECT 1 FROM instances i WHERE i.user_id = OLD.user_id AND i.kind IN ('spot', 'on_demand') AND i.status IN ('pending', 'running', 'interrupting'));
END;

CREATE TRIGGER live_account_revisions_delete AFTER DELETE ON instances
WHEN OLD.kind IN ('spot', 'on_demand') AND OLD.status IN ('pending', 'running', 'interrupting')
BEGIN
    UPDATE live_account_revisions SET revision = random() WHERE user_id = OLD.user_id;
    DELETE FROM live_account_revisions WHERE user_id = OLD.user_id
        AND NOT EXISTS (SELECT 1 FROM instances i WHERE i.user_id = OLD.user_id AND i.kind IN ('spot', 'on_demand') AND i.status IN ('pending', 'running', 'interrupting'));
END;

CREATE TRIGGER live_account_revisions_account_insert AFTER INSERT ON accounts
BEGIN UPDATE live_account_revisions SET revision = random() WHERE user_id = NEW.user_id; END;
CREATE TRIGGER live_account_revisions_account_update AFTER UPDATE OF balance_fen, credit_limit_fen, user_id ON accounts
WHEN OLD.balance_fen IS NOT NEW.balance_fen OR OLD.credit_limit_fen IS NOT NEW.credit_limit_fen OR OLD.user_id IS NOT NEW.user_id
BEGIN UPDATE live_account_revisions SET revision = random() WHERE user_id IN (OLD.user_id, NEW.user_id); END;
CREATE TRIGGER live_account_revisions_account_delete AFTER DELETE ON accounts
BEGIN UPDATE live_account_revisions SET revision = random() WHERE user_id = OLD.user_id; END;
CREATE TRIGGER live_account_revisions_low_noted AFTER UPDATE OF low_balance_noted_at ON users
WHEN (OLD.low_balance_noted_at IS NULL) IS NOT (NEW.low_balance_noted_at IS NULL)
BEGIN UPDATE live_account_revisions SET revision = random() WHERE user_id = NEW.id; END;
