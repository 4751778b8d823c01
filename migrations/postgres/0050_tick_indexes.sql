-- Indexes for questions the tick asks every minute, each of which read
-- every row of its kind before:
-- the reservations due (a confirmed one starting, any ending or near a
-- reminder) by their start and their end, not every live reservation;
CREATE INDEX reservations_status_end ON reservations(status, end_at);
-- whether any GPU is out (its node offline or in a maintenance window,
-- or itself unhealthy), most minutes none: the few that are, not every
-- node and GPU;
CREATE INDEX nodes_out ON nodes(id) WHERE (online = 0 OR drain_note LIKE 'maintenance #%');
CREATE INDEX gpus_unhealthy ON gpus(uuid) WHERE healthy = 0;
-- what each job has running, from the live attempts alone (the index on
-- job_id holds every attempt ever made).
CREATE INDEX instances_live_jobs ON instances(job_id, user_id, kind, model_id, region_id, count, status)
    WHERE job_id IS NOT NULL AND status IN ('pending', 'running', 'interrupting');
