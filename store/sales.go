package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"gpuportal"
)

// Sales is what the platform sold over a period: revenue by product (net
// of refunds; cancellation fees kept), the GPU-hours reservations held,
// and what customers saved against list price (spot discounts, off-peak
// hours).
type Sales struct {
	Revenue          map[string]gpuportal.Fen // "reserved", "on_demand", "spot"
	ReservedGPUHours float64
	Savings          gpuportal.Fen
}

// Products, as Sales names them.
const (
	ProductReserved = "reserved"
	ProductOnDemand = string(gpuportal.KindOnDemand)
	ProductSpot     = string(gpuportal.KindSpot)
)

// Sales sums the ledger and the book over [from, to); the minutes running
// instances have run so far count as if they stopped at to.
func (db *DB) Sales(ctx context.Context, from, to time.Time) (Sales, error) {
	out := Sales{Revenue: map[string]gpuportal.Fen{ProductReserved: 0, ProductOnDemand: 0, ProductSpot: 0}}
	type revenue struct {
		product string
		amount  gpuportal.Fen
	}
	rows, err := scanAll(ctx, db.read, func(r *sql.Rows, v *revenue) error { return r.Scan(&v.product, &v.amount) },
		`SELECT CASE WHEN l.instance_id IS NULL THEN 'reserved' ELSE i.kind END, sum(l.amount_fen) FROM ledger_entries l
		LEFT JOIN instances i ON i.id = l.instance_id WHERE l.at >= ? AND l.at < ? AND l.kind IN ('reservation', 'refund', 'cancellation_fee', 'instance')
		GROUP BY 1`, unix(from), unix(to))
	if err != nil {
		return out, fmt.Errorf("sales: revenue: %w", err)
	}
	for _, r := range rows {
		out.Revenue[r.product] += r.amount
	}
	// Reservations: the hours held (less GPUs that could not be
	// provided), and the list price of what was booked less its price.
	var heldGPUSeconds int64
	var listValue, paid gpuportal.Fen
	if err := db.read.QueryRowContext(ctx, `SELECT coalesce(sum((r.count - r.short_gpus) * (min(r.end_at, ?) - r.start_at)), 0) FROM reservations r
		WHERE r.status IN ('active', 'completed') AND r.start_at >= ? AND r.start_at < ?`, unix(to), unix(from), unix(to)).Scan(&heldGPUSeconds); err != nil {
		return out, fmt.Errorf("sales: reserved hours: %w", err)
	}
	out.ReservedGPUHours = float64(heldGPUSeconds) / 3600
	if err := db.read.QueryRowContext(ctx, `SELECT coalesce(sum(m.list_price_fen * r.count * (r.end_at - r.start_at) / 3600), 0), coalesce(sum(r.price_fen), 0)
		FROM reservations r JOIN models m ON m.id = r.model_id WHERE r.status <> 'cancelled' AND r.created_at >= ? AND r.created_at < ?`,
		unix(from), unix(to)).Scan(&listValue, &paid); err != nil {
		return out, fmt.Errorf("sales: reservation savings: %w", err)
	}
	out.Savings += listValue - paid
	// Instances: billed minutes at list price less their cost, and what
	// the running ones have run so far.
	type run struct {
		kind           gpuportal.InstanceKind
		count, minutes int
		price, list    gpuportal.Fen
		cost           gpuportal.Fen
		started        sql.NullInt64
		live           bool
	}
	runs, err := scanAll(ctx, db.read, func(r *sql.Rows, v *run) error {
		return r.Scan(&v.kind, &v.count, &v.minutes, &v.price, &v.list, &v.cost, &v.started, &v.live)
	}, `SELECT i.kind, i.count, i.billed_minutes, i.price_fen, m.list_price_fen, i.cost_fen, i.started_at, i.status IN ('running', 'interrupting')
		FROM instances i JOIN models m ON m.id = i.model_id WHERE i.kind IN ('spot', 'on_demand') AND i.created_at < ? AND (i.ended_at IS NULL OR i.ended_at >= ?)`,
		unix(to), unix(from))
	if err != nil {
		return out, fmt.Errorf("sales: instances: %w", err)
	}
	for _, r := range runs {
		minutes, cost := r.minutes, r.cost
		if r.live && r.started.Valid {
			m := gpuportal.BillableMinutes(fromUnix(r.started.Int64), to, r.kind, false, false, 0)
			minutes += m
			running := gpuportal.RunCost(r.price, r.count, m)
			cost += running
			out.Revenue[string(r.kind)] += running
		}
		if r.count > 0 { // no-GPU mode has no list price to save against
			out.Savings += gpuportal.RunCost(r.list, r.count, minutes) - cost
		}
	}
	return out, nil
}

// WaitsForGPUs reports whether anything in the pools of the freed GPUs
// could take them: an instance not yet placed, a job with a queued task
// and room under its parallel limit, or a waitlist entry (an on-demand
// instance's GPUs count towards what can be booked); or, anywhere, an
// active reservation that lost GPUs to a failed node (it takes
// replacements). GPUs freed when nothing waits change no placement of a
// tick at the same time: the simulator then skips the tick the portal's
// kick would run, and what else the end of a run changes (an account's
// burn) its next tick sees.
func (db *DB) WaitsForGPUs(ctx context.Context, freed []string) (bool, error) {
	if len(freed) == 0 {
		return false, nil
	}
	args := make([]any, len(freed))
	for k, uuid := range freed {
		args[k] = uuid
	}
	var waits bool
	err := db.read.QueryRowContext(ctx, `WITH freed AS (SELECT DISTINCT g.model_id, n.region_id FROM gpus g JOIN nodes n ON n.id = g.node_id WHERE g.uuid IN (?`+repeatArg(len(freed)-1)+`))
		SELECT EXISTS (SELECT 1 FROM instances i JOIN freed f ON i.model_id = f.model_id AND i.region_id = f.region_id
				WHERE i.status = 'pending' AND i.node_id IS NULL AND i.stop_requested_at IS NULL)
			OR EXISTS (SELECT 1 FROM jobs j JOIN freed f ON j.model_id = f.model_id AND j.region_id = f.region_id
				WHERE j.status IN ('queued', 'running') AND EXISTS (SELECT 1 FROM job_tasks t WHERE t.job_id = j.id AND t.status = 'queued')
				AND j.max_parallel > (SELECT count(*) FROM instances li WHERE li.job_id = j.id AND li.status IN ('pending', 'running', 'interrupting')))
			OR EXISTS (SELECT 1 FROM waitlist_entries w JOIN freed f ON w.model_id = f.model_id AND w.region_id = f.region_id WHERE w.status = 'waiting')
			OR EXISTS (SELECT 1 FROM reservation_gpus rg JOIN gpus g ON g.uuid = rg.gpu_uuid JOIN nodes n ON n.id = g.node_id
				WHERE `+gpuOut+`)`, args...).Scan(&waits)
	if err != nil {
		return false, fmt.Errorf("waits for GPUs: %w", err)
	}
	return waits, nil
}

// NodeRevisions is every node's desired-state revision: a node whose
// revision moved has something new to run or stop (the simulator's nodes
// read it instead of long polls).
func (db *DB) NodeRevisions(ctx context.Context) (map[string]int64, error) {
	type rev struct {
		id  string
		rev int64
	}
	rows, err := scanAll(ctx, db.read, func(r *sql.Rows, v *rev) error { return r.Scan(&v.id, &v.rev) }, `SELECT id, revision FROM nodes`)
	if err != nil {
		return nil, fmt.Errorf("node revisions: %w", err)
	}
	out := make(map[string]int64, len(rows))
	for _, r := range rows {
		out[r.id] = r.rev
	}
	return out, nil
}
