-- A booking may carry what to run at its start (image and command, or a
-- machine to log into): at the start the portal launches it on all the
-- reservation's GPUs, one instance per node. NULL: nothing starts itself.
ALTER TABLE reservations ADD COLUMN launch_json TEXT;
