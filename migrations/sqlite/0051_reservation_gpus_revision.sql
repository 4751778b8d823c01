-- reservation_gpus_revision names the state of which GPUs the active
-- reservations hold (their assignments and the reservations' status), so
-- the tick keeps that map between runs and reads it again only after a
-- change (store.assignments): it changes when a reservation starts, ends
-- or has a GPU replaced, while the tick reads it most minutes. Triggers
-- renew it, as fleet_revision (0031).
CREATE TABLE reservation_gpus_revision (id INTEGER PRIMARY KEY CHECK (id = 1), revision INTEGER NOT NULL);
INSERT INTO reservation_gpus_revision (id, revision) VALUES (1, 1);
CREATE TRIGGER reservation_gpus_revision_insert AFTER INSERT ON reservation_gpus
BEGIN UPDATE reservation_gpus_revision SET revision = random(); END;
CREATE TRIGGER reservation_gpus_revision_delete AFTER DELETE ON reservation_gpus
BEGIN UPDATE reservation_gpus_revision SET revision = random(); END;
CREATE TRIGGER reservation_gpus_revision_update AFTER UPDATE ON reservation_gpus
BEGIN UPDATE reservation_gpus_revision SET revision = random(); END;
CREATE TRIGGER reservations_gpus_revision_status AFTER UPDATE OF status ON reservations
WHEN OLD.status IS NOT NEW.status
BEGIN UPDATE reservation_gpus_revision SET revision = random(); END;
CREATE TRIGGER reservations_gpus_revision_delete AFTER DELETE ON reservations
BEGIN UPDATE reservation_gpus_revision SET revision = random(); END;
