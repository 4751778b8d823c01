-- The trailing 30 days' distinct counts of the interruption rates, rolled
-- up: the day (UTC) each instance last ran and was last interrupted, so
-- "instances that ran in the window" is an index range count instead of a
-- DISTINCT over every run of the window.
CREATE TABLE spot_instance_days (
    instance_id INTEGER PRIMARY KEY,
    model_id    TEXT NOT NULL,
    region_id   TEXT NOT NULL,
    ran_day     INTEGER,   -- day of its latest rolled-up run's end
    hit_day     INTEGER    -- day of its latest rolled-up interruption
);
CREATE INDEX spot_instance_ran ON spot_instance_days(model_id, region_id, ran_day);
CREATE INDEX spot_instance_hit ON spot_instance_days(model_id, region_id, hit_day);

INSERT INTO spot_instance_days (instance_id, model_id, region_id, ran_day)
    SELECT instance_id, model_id, region_id, max(ended_at - ended_at % 86400) FROM spot_runs WHERE rolled = 1
    GROUP BY instance_id, model_id, region_id;
INSERT INTO spot_instance_days (instance_id, model_id, region_id, hit_day)
    SELECT instance_id, model_id, region_id, max(notice_at - notice_at % 86400) FROM interruptions WHERE rolled = 1
    GROUP BY instance_id, model_id, region_id
    ON CONFLICT (instance_id) DO UPDATE SET hit_day = excluded.hit_day;
