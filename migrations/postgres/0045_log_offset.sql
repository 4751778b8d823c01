-- Following a log from an offset (issue 48: gpu logs -f reads only what is new).
ALTER TABLE sessions ADD COLUMN log_offset BIGINT;
