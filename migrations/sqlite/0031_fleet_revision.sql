-- fleet_revision names the state of what a pool's usable GPUs are (which
-- GPUs a node has, their model and health, the nodes' region, online and
-- drain), so the tick keeps its GPU lists between runs and reads them
-- again only after a change (store.poolGPUs). Triggers renew it, so no
-- write path can forget to; with a random number, not a count, since a
-- change rolled back must not leave its number to a later, other one.
CREATE TABLE fleet_revision (id INTEGER PRIMARY KEY CHECK (id = 1), revision INTEGER NOT NULL);
INSERT INTO fleet_revision (id, revision) VALUES (1, 1);
CREATE TRIGGER gpus_fleet_insert AFTER INSERT ON gpus
BEGIN UPDATE fleet_revision SET revision = random(); END;
CREATE TRIGGER gpus_fleet_delete AFTER DELETE ON gpus
BEGIN UPDATE fleet_revision SET revision = random(); END;
CREATE TRIGGER gpus_fleet_update AFTER UPDATE OF uuid, node_id, idx, model_id, healthy ON gpus
WHEN OLD.uuid IS NOT NEW.uuid OR OLD.node_id IS NOT NEW.node_id OR OLD.idx IS NOT NEW.idx OR OLD.model_id IS NOT NEW.model_id OR OLD.healthy IS NOT NEW.healthy
BEGIN UPDATE fleet_revision SET revision = random(); END;
CREATE TRIGGER nodes_fleet_insert AFTER INSERT ON nodes
BEGIN UPDATE fleet_revision SET revision = random(); END;
CREATE TRIGGER nodes_fleet_delete AFTER DELETE ON nodes
BEGIN UPDATE fleet_revision SET revision = random(); END;
CREATE TRIGGER nodes_fleet_update AFTER UPDATE OF id, region_id, online, drain ON nodes
WHEN OLD.id IS NOT NEW.id OR OLD.region_id IS NOT NEW.region_id OR OLD.online IS NOT NEW.online OR OLD.drain IS NOT NEW.drain
BEGIN UPDATE fleet_revision SET revision = random(); END;
