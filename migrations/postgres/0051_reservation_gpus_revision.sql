-- reservation_gpus_revision names the state of which GPUs the active
-- reservations hold (their assignments and the reservations' status), so
-- the tick keeps that map between runs and reads it again only after a
-- change (store.assignments): it changes when a reservation starts, ends
-- or has a GPU replaced, while the tick reads it most minutes. Triggers
-- renew it from a sequence, as fleet_revision (0031).
CREATE TABLE reservation_gpus_revision (id BIGINT PRIMARY KEY CHECK (id = 1), revision BIGINT NOT NULL);
CREATE SEQUENCE reservation_gpus_revisions START 2;
INSERT INTO reservation_gpus_revision (id, revision) VALUES (1, 1);
CREATE FUNCTION renew_reservation_gpus_revision() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	UPDATE reservation_gpus_revision SET revision = nextval('reservation_gpus_revisions');
	RETURN NULL;
END $$;
CREATE TRIGGER reservation_gpus_revision_change AFTER INSERT OR DELETE OR UPDATE ON reservation_gpus
FOR EACH ROW EXECUTE FUNCTION renew_reservation_gpus_revision();
CREATE TRIGGER reservations_gpus_revision_status AFTER UPDATE OF status ON reservations
FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status)
EXECUTE FUNCTION renew_reservation_gpus_revision();
CREATE TRIGGER reservations_gpus_revision_delete AFTER DELETE ON reservations
FOR EACH ROW EXECUTE FUNCTION renew_reservation_gpus_revision();
