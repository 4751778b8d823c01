-- fleet_revision names the state of what a pool's usable GPUs are (which
-- GPUs a node has, their model and health, the nodes' region, online and
-- drain), so the tick keeps its GPU lists between runs and reads them
-- again only after a change (store.poolGPUs). Triggers renew it, so no
-- write path can forget to; from a sequence, which never hands out a
-- number twice, even when the change that took it is rolled back.
CREATE TABLE fleet_revision (id BIGINT PRIMARY KEY CHECK (id = 1), revision BIGINT NOT NULL);
CREATE SEQUENCE fleet_revisions START 2;
INSERT INTO fleet_revision (id, revision) VALUES (1, 1);
CREATE FUNCTION renew_fleet_revision() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	UPDATE fleet_revision SET revision = nextval('fleet_revisions');
	RETURN NULL;
END $$;
CREATE TRIGGER gpus_fleet_insert_delete AFTER INSERT OR DELETE ON gpus
FOR EACH ROW EXECUTE FUNCTION renew_fleet_revision();
CREATE TRIGGER gpus_fleet_update AFTER UPDATE OF uuid, node_id, idx, model_id, healthy ON gpus
FOR EACH ROW WHEN (OLD.uuid IS DISTINCT FROM NEW.uuid OR OLD.node_id IS DISTINCT FROM NEW.node_id OR OLD.idx IS DISTINCT FROM NEW.idx
	OR OLD.model_id IS DISTINCT FROM NEW.model_id OR OLD.healthy IS DISTINCT FROM NEW.healthy)
EXECUTE FUNCTION renew_fleet_revision();
CREATE TRIGGER nodes_fleet_insert_delete AFTER INSERT OR DELETE ON nodes
FOR EACH ROW EXECUTE FUNCTION renew_fleet_revision();
CREATE TRIGGER nodes_fleet_update AFTER UPDATE OF id, region_id, online, drain ON nodes
FOR EACH ROW WHEN (OLD.id IS DISTINCT FROM NEW.id OR OLD.region_id IS DISTINCT FROM NEW.region_id OR OLD.online IS DISTINCT FROM NEW.online
	OR OLD.drain IS DISTINCT FROM NEW.drain)
EXECUTE FUNCTION renew_fleet_revision();
