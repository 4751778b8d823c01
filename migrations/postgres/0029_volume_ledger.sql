-- A volume's charges name it, so the ledger and the statement say which
-- volume in the reader's language.
ALTER TABLE ledger_entries ADD COLUMN volume_id BIGINT REFERENCES volumes(id);
