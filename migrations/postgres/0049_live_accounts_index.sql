-- The tick sums each account's live spot and on-demand runs every minute:
-- read from this index alone, in account order, not from the rows.
CREATE INDEX instances_live_accounts ON instances(user_id, status, stop_requested_at, interrupt_reason, price_fen, count, started_at)
    WHERE kind IN ('spot', 'on_demand') AND status IN ('pending', 'running', 'interrupting');
