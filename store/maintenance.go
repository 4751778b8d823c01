package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"gpuportal"
)

// Maintenance windows. A window's GPUs are added to hourly_usage.reserved
// for its hours, as if the operator had booked them: every admission rule
// sees them taken. Bookings that no longer fit are cancelled with a full
// refund (the newest first); the tick gives spot instances on its nodes
// their notice before the start, drains the nodes and stops what else
// runs there at the start, and undrains them at the end.

// errDryRun rolls a dry run's transaction back.
var errDryRun = errors.New("dry run")

// maintenanceNote is the drain note of a node a window drained.
func maintenanceNote(id int64, reason string) string {
	return fmt.Sprintf("maintenance #%d: %s", id, reason)
}

// The rule for a GPU a reservation cannot use, as SQL over a GPU g and its
// node n: its node offline or in a maintenance window (its drain note says
// so, maintenanceNote), or the GPU itself unhealthy. A reservation holding
// one is short, and the planner replaces it. Migration 0050's partial
// indexes nodes_out and gpus_unhealthy repeat these conditions word for
// word (SQLite uses such an index only for the same expression): change
// them together.
const (
	nodeOut = `(n.online = 0 OR n.drain_note LIKE 'maintenance #%')`
	gpuOut  = `(` + nodeOut + ` OR g.healthy = 0)`
)

// CreateMaintenance plans a window (an admin; audited), or with DryRun
// only lists the reservations it would cancel.
func (db *DB) CreateMaintenance(ctx context.Context, actor *gpuportal.User, req gpuportal.MaintenanceRequest) (*gpuportal.Maintenance, error) {
	if !actor.IsAdmin() {
		return nil, gpuportal.Errorf(gpuportal.EFORBIDDEN, "Only admins plan maintenance.")
	}
	now := db.now()
	if err := gpuportal.ValidateMaintenance(&req, now); err != nil {
		return nil, err
	}
	out := &gpuportal.Maintenance{Region: req.Region, Start: req.Start.UTC(), End: req.End.UTC(), Reason: req.Reason, CreatedAt: now, DryRun: req.DryRun, Affected: []int64{}}
	var nodes, freed []string // the window's nodes; those cancelled bookings held GPUs on
	err := db.inTx(ctx, "plan maintenance", func(tx *sql.Tx) error {
		freed = freed[:0]
		var err error
		if nodes, out.Region, err = maintenanceNodes(ctx, tx, req); err != nil {
			return err
		}
		if req.NodeID != "" {
			out.NodeID = &req.NodeID
		}
		var nodeArg any
		if req.NodeID != "" {
			nodeArg = req.NodeID
		}
		if err := tx.QueryRowContext(ctx, `INSERT INTO maintenance_windows (node_id, region_id, start_at, end_at, reason, created_by, created_at) VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id`,
			nodeArg, out.Region, unix(out.Start), unix(out.End), out.Reason, actor.ID, unix(now)).Scan(&out.ID); err != nil {
			return err
		}
		type pool struct {
			model string
			gpus  int
		}
		pools, err := scanAll(ctx, tx, func(r *sql.Rows, p *pool) error { return r.Scan(&p.model, &p.gpus) },
			`SELECT model_id, count(*) FROM gpus WHERE healthy = 1 AND node_id IN (?`+repeatArg(len(nodes)-1)+`) GROUP BY model_id ORDER BY model_id`, anys(nodes)...)
		if err != nil {
			return err
		}
		from, to := out.Start.Truncate(time.Hour), ceilHour(out.End)
		for _, p := range pools {
			if _, err := tx.ExecContext(ctx, `INSERT INTO maintenance_gpus (window_id, model_id, region_id, gpus) VALUES (?, ?, ?, ?)`, out.ID, p.model, out.Region, p.gpus); err != nil {
				return err
			}
			if err := db.ensureUsageRows(ctx, tx, p.model, out.Region, from, to); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `UPDATE hourly_usage SET reserved = reserved + ? WHERE model_id = ? AND region_id = ? AND hour >= ? AND hour < ?`,
				p.gpus, p.model, out.Region, unix(from), unix(to)); err != nil {
				return err
			}
			out.GPUs += p.gpus
			cancelled, err := db.cancelOverbooked(ctx, tx, out, p.model, from, to, now, &freed)
			if err != nil {
				return err
			}
			out.Affected = append(out.Affected, cancelled...)
		}
		if req.DryRun {
			return errDryRun
		}
		if _, err := tx.ExecContext(ctx, `UPDATE maintenance_windows SET affected = ? WHERE id = ?`, joinIDs(out.Affected), out.ID); err != nil {
			return err
		}
		if err := db.tellInstanceOwners(ctx, tx, out, nodes); err != nil {
			return err
		}
		return db.audit(ctx, tx, actor.ID, "maintenance.create", fmt.Sprintf("maintenance/%d", out.ID), nil, out)
	})
	if errors.Is(err, errDryRun) {
		out.ID = 0
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	db.wake(ctx, freed...)
	db.Kick(ctx)
	return out, nil
}

func anys(list []string) []any {
	out := make([]any, len(list))
	for k, s := range list {
		out[k] = s
	}
	return out
}

func joinIDs(ids []int64) string {
	parts := make([]string, len(ids))
	for k, id := range ids {
		parts[k] = strconv.FormatInt(id, 10)
	}
	return strings.Join(parts, ",")
}

func ceilHour(t time.Time) time.Time {
	if h := t.Truncate(time.Hour); !h.Equal(t) {
		return h.Add(time.Hour)
	}
	return t
}

// maintenanceNodes are the nodes a request names, with their region: 404
// for an unknown node or region.
func maintenanceNodes(ctx context.Context, q queryer, req gpuportal.MaintenanceRequest) ([]string, string, error) {
	if req.NodeID != "" {
		var region string
		err := q.QueryRowContext(ctx, `SELECT region_id FROM nodes WHERE id = ?`, req.NodeID).Scan(&region)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, "", gpuportal.FieldErrorf(gpuportal.ENOTFOUND, "node_id", "Node %s not found.", req.NodeID)
		} else if err == nil && req.Region != "" && req.Region != region {
			return nil, "", gpuportal.FieldErrorf(gpuportal.EPOLICY, "node_id", "Node %s is in region %s, not %s.", req.NodeID, region, req.Region)
		}
		return []string{req.NodeID}, region, err
	}
	nodes, err := scanAll(ctx, q, func(r *sql.Rows, id *string) error { return r.Scan(id) }, `SELECT id FROM nodes WHERE region_id = ? ORDER BY id`, req.Region)
	if err != nil {
		return nil, "", err
	}
	if len(nodes) == 0 {
		return nil, "", gpuportal.FieldErrorf(gpuportal.ENOTFOUND, "region", "No nodes in region %q.", req.Region)
	}
	return nodes, req.Region, nil
}

// cancelOverbooked cancels, newest first, the bookings of a pool that no
// longer fit an hour of [from, to) beside the window's GPUs, each with a
// full refund and its owner told why; the rest keep their GPUs (an
// active one is moved off the window's nodes at its start).
func (db *DB) cancelOverbooked(ctx context.Context, tx *sql.Tx, w *gpuportal.Maintenance, model string, from, to, now time.Time, nodes *[]string) ([]int64, error) {
	_, policy, err := db.catalogEntry(ctx, tx, model, w.Region)
	if err != nil {
		return nil, err
	}
	capacity, err := db.reservableNow(ctx, tx, model, w.Region, policy, false)
	if err != nil {
		return nil, err
	}
	var out []int64
	for range 10_000 {
		var hour int64
		err := tx.QueryRowContext(ctx, `SELECT hour FROM hourly_usage WHERE model_id = ? AND region_id = ? AND hour >= ? AND hour < ? AND reserved > ? ORDER BY hour LIMIT 1`,
			model, w.Region, unix(from), unix(to), capacity).Scan(&hour)
		if errors.Is(err, sql.ErrNoRows) {
			return out, nil
		} else if err != nil {
			return nil, err
		}
		var victim int64
		err = tx.QueryRowContext(ctx, `SELECT id FROM reservations WHERE model_id = ? AND region_id = ? AND status IN ('confirmed', 'active') AND start_at <= ? AND end_at > ?
			ORDER BY created_at DESC, id DESC LIMIT 1`, model, w.Region, hour, hour).Scan(&victim)
		if errors.Is(err, sql.ErrNoRows) {
			return out, nil // the window alone is more than the pool: nothing left to cancel
		} else if err != nil {
			return nil, err
		}
		if err := db.cancelForMaintenance(ctx, tx, victim, w, now, nodes); err != nil {
			return nil, err
		}
		out = append(out, victim)
	}
	return out, nil
}

// cancelForMaintenance cancels a reservation the window leaves no room
// for: the whole price back, the hours freed, its owner told why (with
// where to book instead).
func (db *DB) cancelForMaintenance(ctx context.Context, tx *sql.Tx, id int64, w *gpuportal.Maintenance, now time.Time, nodes *[]string) error {
	r, err := reservationFor(ctx, tx, nil, id)
	if err != nil {
		return err
	}
	// No fee: the whole price back.
	if err := db.markCancelled(ctx, tx, r, gpuportal.CancellationPreview{Refund: r.Price}, now, nodes); err != nil {
		return err
	}
	if err := db.post(ctx, tx, r.UserID, now, &r.ID, []gpuportal.Posting{{Kind: gpuportal.LedgerRefund, Amount: -r.Price,
		Description: fmt.Sprintf("Reservation #%d cancelled for maintenance (%s): price returned", id, w.Reason)}}); err != nil {
		return err
	}
	if err := db.notify(ctx, tx, r.UserID, gpuportal.NoteMaintenance, gpuportal.NoteParams{ReservationID: id, Model: r.Model, Region: r.Region, Count: r.Count,
		Start: w.Start, End: w.End, Subject: w.Reason, Refund: r.Price, ExtendHours: r.Hours()}); err != nil {
		return err
	}
	if err := db.emitReservation(ctx, tx, id, gpuportal.EventReservationCancel); err != nil {
		return err
	}
	if err := db.emit(ctx, tx, r.UserID, gpuportal.EventMaintenanceScheduled, func() (any, error) { return w, nil }); err != nil {
		return err
	}
	return db.audit(ctx, tx, 0, "reservation.cancel_for_maintenance", fmt.Sprintf("reservation/%d", id),
		map[string]any{"status": r.Status, "price_fen": r.Price}, map[string]any{"status": "cancelled", "refund_fen": r.Price, "maintenance": w.ID})
}

// tellInstanceOwners tells the owners of what runs on the window's nodes
// now: spot instances get their notice before the start, the rest are
// stopped at the start.
func (db *DB) tellInstanceOwners(ctx context.Context, tx *sql.Tx, w *gpuportal.Maintenance, nodes []string) error {
	type inst struct {
		id, user         int64
		kind, model, reg string
		count            int
	}
	list, err := scanAll(ctx, tx, func(r *sql.Rows, i *inst) error { return r.Scan(&i.id, &i.user, &i.kind, &i.model, &i.reg, &i.count) },
		`SELECT id, user_id, kind, model_id, region_id, count FROM instances WHERE status IN ('pending', 'running') AND node_id IN (?`+repeatArg(len(nodes)-1)+`) ORDER BY id`, anys(nodes)...)
	if err != nil {
		return err
	}
	told := map[int64]bool{}
	for _, i := range list {
		if err := db.notify(ctx, tx, i.user, gpuportal.NoteMaintenance, gpuportal.NoteParams{InstanceID: i.id, Model: i.model, Region: i.reg, Count: i.count,
			Kind: i.kind, Start: w.Start, End: w.End, Subject: w.Reason}); err != nil {
			return err
		}
		if !told[i.user] {
			told[i.user] = true
			if err := db.emit(ctx, tx, i.user, gpuportal.EventMaintenanceScheduled, func() (any, error) { return w, nil }); err != nil {
				return err
			}
		}
	}
	return nil
}

const maintenanceColumns = `id, node_id, region_id, start_at, end_at, reason, created_at, ended_at, affected,
	(SELECT coalesce(sum(gpus), 0) FROM maintenance_gpus g WHERE g.window_id = maintenance_windows.id)`

func scanMaintenance(row interface{ Scan(...any) error }) (*gpuportal.Maintenance, error) {
	var m gpuportal.Maintenance
	var node sql.NullString
	var start, end, created int64
	var ended sql.NullInt64
	var affected string
	if err := row.Scan(&m.ID, &node, &m.Region, &start, &end, &m.Reason, &created, &ended, &affected, &m.GPUs); err != nil {
		return nil, err
	}
	if node.Valid {
		m.NodeID = &node.String
	}
	m.Start, m.End, m.CreatedAt, m.EndedAt = fromUnix(start), fromUnix(end), fromUnix(created), fromNullUnix(ended)
	m.Affected = []int64{}
	for _, s := range strings.Split(affected, ",") {
		if id, err := strconv.ParseInt(s, 10, 64); err == nil {
			m.Affected = append(m.Affected, id)
		}
	}
	return &m, nil
}

// Maintenances lists the windows not over a week ago, soonest first.
func (db *DB) Maintenances(ctx context.Context) ([]gpuportal.Maintenance, error) {
	list, err := scanEach(ctx, db.read, scanMaintenance, `SELECT `+maintenanceColumns+` FROM maintenance_windows WHERE end_at > ? ORDER BY start_at, id`,
		unix(db.now().Add(-7*24*time.Hour)))
	if err != nil {
		return nil, fmt.Errorf("maintenance windows: %w", err)
	}
	out := make([]gpuportal.Maintenance, len(list))
	for k, m := range list {
		out[k] = *m
	}
	return out, nil
}

// EndMaintenance ends a window now (DELETE; an admin, audited): its
// hours from now on are bookable again and its nodes undrained.
func (db *DB) EndMaintenance(ctx context.Context, actor *gpuportal.User, id int64) error {
	if !actor.IsAdmin() {
		return gpuportal.Errorf(gpuportal.EFORBIDDEN, "Only admins plan maintenance.")
	}
	now := db.now()
	return db.kickAfter(ctx, db.inTx(ctx, "end maintenance", func(tx *sql.Tx) error {
		m, err := scanMaintenance(tx.QueryRowContext(ctx, `SELECT `+maintenanceColumns+` FROM maintenance_windows WHERE id = ?`, id))
		if errors.Is(err, sql.ErrNoRows) {
			return gpuportal.Errorf(gpuportal.ENOTFOUND, "Maintenance window %d not found.", id)
		} else if err != nil {
			return err
		}
		if m.EndedAt != nil || !m.End.After(now) {
			return gpuportal.Errorf(gpuportal.ECONFLICT, "Maintenance window %d is over already.", id)
		}
		if err := db.giveBackHours(ctx, tx, m, now); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE maintenance_windows SET ended_at = ? WHERE id = ?`, unix(now), id); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE nodes SET drain = 0, drain_note = '' WHERE drain_note = ?`, maintenanceNote(id, m.Reason)); err != nil {
			return err
		}
		return db.audit(ctx, tx, actor.ID, "maintenance.end", fmt.Sprintf("maintenance/%d", id), map[string]any{"end": m.End}, map[string]any{"end": now})
	}))
}

// giveBackHours returns a window's GPUs to the hours from now on.
func (db *DB) giveBackHours(ctx context.Context, tx *sql.Tx, m *gpuportal.Maintenance, now time.Time) error {
	from := m.Start.Truncate(time.Hour)
	if h := now.Truncate(time.Hour).Add(time.Hour); h.After(from) && !m.Start.After(now) {
		from = h // the hour under way stays out: work on the node has begun
	}
	type pool struct {
		model string
		gpus  int
	}
	pools, err := scanAll(ctx, tx, func(r *sql.Rows, p *pool) error { return r.Scan(&p.model, &p.gpus) },
		`SELECT model_id, gpus FROM maintenance_gpus WHERE window_id = ?`, m.ID)
	if err != nil {
		return err
	}
	for _, p := range pools {
		if err := releaseCapacity(ctx, tx, p.model, m.Region, from, ceilHour(m.End), p.gpus); err != nil {
			return err
		}
	}
	return nil
}

// maintenanceStep is the tick's part for windows under way or near: spot
// instances on their nodes get their notice so that their GPUs are free
// at the start; at the start the nodes are drained and what else runs
// there is stopped; at the end they are undrained. Each step checks the
// state it leaves, so running it again changes nothing.
func (db *DB) maintenanceStep(ctx context.Context, now time.Time) ([]string, error) {
	// Most ticks have no window open: one read, and no write transaction.
	var open int
	if err := db.read.QueryRowContext(ctx, `SELECT count(*) FROM maintenance_windows WHERE ended_at IS NULL`).Scan(&open); err != nil {
		return nil, fmt.Errorf("maintenance windows: %w", err)
	}
	if open == 0 {
		return nil, nil
	}
	var woken []string
	err := db.inTx(ctx, "maintenance step", func(tx *sql.Tx) error {
		pol, err := db.policies(ctx, tx)
		if err != nil {
			return err
		}
		// A little ahead of the planner's own reclaim for the same hours.
		lead := time.Duration(pol.Global.SpotNoticeSeconds+pol.Global.SpotGraceSeconds)*time.Second + 2*time.Minute
		list, err := scanEach(ctx, tx, scanMaintenance, `SELECT `+maintenanceColumns+` FROM maintenance_windows WHERE ended_at IS NULL AND start_at <= ? ORDER BY id`, unix(now.Add(lead)))
		if err != nil {
			return err
		}
		for _, m := range list {
			var nodes []string
			if m.NodeID != nil {
				nodes = []string{*m.NodeID}
			} else if nodes, _, err = maintenanceNodes(ctx, tx, gpuportal.MaintenanceRequest{Region: m.Region}); err != nil {
				return err
			}
			note := maintenanceNote(m.ID, m.Reason)
			if !m.End.After(now) {
				if _, err := tx.ExecContext(ctx, `UPDATE nodes SET drain = 0, drain_note = '' WHERE drain_note = ?`, note); err != nil {
					return err
				}
				if _, err := tx.ExecContext(ctx, `UPDATE maintenance_windows SET ended_at = end_at WHERE id = ?`, m.ID); err != nil {
					return err
				}
				woken = append(woken, nodes...)
				continue
			}
			in := `node_id IN (?` + repeatArg(len(nodes)-1) + `)`
			spots, err := scanEach(ctx, tx, scanOneInstance, `SELECT `+instanceColumns+` FROM instances WHERE kind = 'spot' AND status IN ('pending', 'running') AND `+in, anys(nodes)...)
			if err != nil {
				return err
			}
			deadline := m.Start.Add(-time.Duration(pol.Global.SpotGraceSeconds) * time.Second)
			if deadline.Before(now) {
				deadline = now
			}
			for _, i := range spots {
				if err := db.interrupt(ctx, tx, i, gpuportal.ReasonMaintenance, now, deadline, pol.Global.SpotGraceSeconds); err != nil {
					return err
				}
			}
			if m.Start.After(now) {
				continue
			}
			if _, err := tx.ExecContext(ctx, `UPDATE nodes SET drain = 1, drain_note = ? WHERE drain = 0 AND `+strings.Replace(in, "node_id", "id", 1), append([]any{note}, anys(nodes)...)...); err != nil {
				return err
			}
			res, err := tx.ExecContext(ctx, `UPDATE instances SET stop_requested_at = ?, error = ? WHERE kind <> 'spot' AND status IN ('pending', 'running') AND stop_requested_at IS NULL AND `+in,
				append([]any{unix(now), "stopped for maintenance: " + m.Reason}, anys(nodes)...)...)
			if err != nil {
				return err
			}
			if n, _ := res.RowsAffected(); n > 0 || len(spots) > 0 {
				for _, node := range nodes {
					if err := bumpNode(ctx, tx, node); err != nil {
						return err
					}
				}
				woken = append(woken, nodes...)
			}
		}
		return nil
	})
	return woken, err
}

// maintenanceByHour is how many GPUs of a pool windows take out of each
// hour of [from, to), and why (for the calendar).
func (db *DB) maintenanceByHour(ctx context.Context, q queryer, model, region string, from, to time.Time) (map[int64]int, map[int64]string, error) {
	type row struct {
		start, end int64
		ended      sql.NullInt64
		reason     string
		gpus       int
	}
	rows, err := scanAll(ctx, q, func(r *sql.Rows, w *row) error { return r.Scan(&w.start, &w.end, &w.ended, &w.reason, &w.gpus) },
		`SELECT w.start_at, w.end_at, w.ended_at, w.reason, g.gpus FROM maintenance_windows w JOIN maintenance_gpus g ON g.window_id = w.id
		WHERE g.model_id = ? AND g.region_id = ? AND w.start_at < ? AND w.end_at > ?`, model, region, unix(to), unix(from))
	if err != nil {
		return nil, nil, fmt.Errorf("maintenance hours: %w", err)
	}
	gpus, why := map[int64]int{}, map[int64]string{}
	for _, w := range rows {
		end := fromUnix(w.end)
		if w.ended.Valid {
			if e := fromUnix(w.ended.Int64).Truncate(time.Hour).Add(time.Hour); e.Before(end) {
				end = e
			}
		}
		for t := fromUnix(w.start).Truncate(time.Hour); t.Before(ceilHour(end)); t = t.Add(time.Hour) {
			gpus[unix(t)] += w.gpus
			why[unix(t)] = w.reason
		}
	}
	return gpus, why, nil
}
