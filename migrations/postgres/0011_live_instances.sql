-- Every tick counts the live instances per pool (the planner's snapshot)
-- and per user (the balances). An instance row is wide (command, log
-- tail), so these counts read an index alone instead of the rows; the
-- first is in the order the pool counts group by.
CREATE INDEX instances_live_pool ON instances(status, kind, model_id, region_id, node_id, job_id, count);
CREATE INDEX instances_live_user ON instances(status, kind, user_id, stop_requested_at, count, price_fen, started_at);
