package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"gpuportal"
)

// TickResult counts what one scheduler tick did.
type TickResult struct {
	Activated, Completed, Interrupted, Placed, NodeFailures, Offers, TasksStarted int
}

// Tick does whatever is due by now, each step in its own transaction:
// reservations end and start (getting concrete GPUs), work on failed nodes
// is interrupted or failed, spot instances that stand in the way of
// reservations or on-demand demand get their notice, and pending instances
// are placed. It is idempotent: a second tick at the same time does nothing.
func (db *DB) Tick(ctx context.Context, now time.Time) (TickResult, error) {
	var res TickResult
	var nodes []string
	steps := []func(context.Context, *sql.Tx, time.Time, *TickResult, *[]string) error{
		db.completeReservations, db.activateReservations, db.handleNodeFailures, db.balanceStep, db.preempt, db.place, db.jobStep, db.expireTopUps,
		db.waitlistStep, db.remindersStep, db.rollupStep,
	}
	for _, step := range steps {
		if err := db.inTx(ctx, func(tx *sql.Tx) error { return step(ctx, tx, now, &res, &nodes) }); err != nil {
			return res, fmt.Errorf("tick at %s: %w", now.Format(time.RFC3339), err)
		}
	}
	db.wake(ctx, nodes...)
	return res, nil
}

func (db *DB) policyFor(ctx context.Context, tx *sql.Tx, model string) (gpuportal.Policy, error) {
	p, err := db.policies(ctx, tx)
	if err != nil {
		return gpuportal.Policy{}, err
	}
	return p.For(model), nil
}

func queryIDs(ctx context.Context, q queryer, query string, args ...any) ([]int64, error) {
	return scanColumn[int64](q.QueryContext(ctx, query, args...))
}

// scanColumn reads every row of a one-column result.
func scanColumn[T any](rows *sql.Rows, err error) ([]T, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		var v T
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// completeReservations ends reservations whose end has come; their reserved
// instances stop with them.
func (db *DB) completeReservations(ctx context.Context, tx *sql.Tx, now time.Time, res *TickResult, nodes *[]string) error {
	ids, err := queryIDs(ctx, tx, `SELECT id FROM reservations WHERE status IN ('confirmed', 'active') AND end_at <= ?`, unix(now))
	if err != nil {
		return err
	}
	for _, id := range ids {
		if _, err := tx.ExecContext(ctx, `UPDATE reservations SET status = 'completed' WHERE id = ?`, id); err != nil {
			return fmt.Errorf("complete reservation %d: %w", id, err)
		}
		var userID int64
		var gpuHours int
		if err := tx.QueryRowContext(ctx, `SELECT user_id, count * (end_at - start_at) / 3600 FROM reservations WHERE id = ?`, id).Scan(&userID, &gpuHours); err != nil {
			return err
		}
		if err := db.bookedHours(ctx, tx, userID, -gpuHours); err != nil {
			return err
		}
		if err := db.releaseReservationGPUs(ctx, tx, id, now, nodes); err != nil {
			return fmt.Errorf("complete reservation %d: %w", id, err)
		}
		res.Completed++
	}
	return nil
}

// releaseReservationGPUs ends a reservation's hold on its GPUs (it
// completed or was cancelled): the assignment goes at once, and its
// reserved instances get the normal stop. Their GPUs stay held by the
// instances until their agents report them stopped and the GPUs free.
func (db *DB) releaseReservationGPUs(ctx context.Context, tx *sql.Tx, reservationID int64, now time.Time, nodes *[]string) error {
	if _, err := tx.ExecContext(ctx, `DELETE FROM reservation_gpus WHERE reservation_id = ?`, reservationID); err != nil {
		return fmt.Errorf("release GPUs: %w", err)
	}
	if err := db.stopReservedInstances(ctx, tx, reservationID, now, nodes); err != nil {
		return fmt.Errorf("stop reserved instances: %w", err)
	}
	return nil
}

func (db *DB) stopReservedInstances(ctx context.Context, tx *sql.Tx, reservationID int64, now time.Time, nodes *[]string) error {
	rows, err := tx.QueryContext(ctx, `SELECT id, coalesce(node_id, '') FROM instances WHERE reservation_id = ? AND status IN ('pending', 'running') AND stop_requested_at IS NULL`, reservationID)
	if err != nil {
		return err
	}
	type inst struct {
		id   int64
		node string
	}
	var list []inst
	for rows.Next() {
		var i inst
		if err := rows.Scan(&i.id, &i.node); err != nil {
			rows.Close()
			return err
		}
		list = append(list, i)
	}
	rows.Close()
	for _, i := range list {
		if i.node == "" {
			if _, err := tx.ExecContext(ctx, `UPDATE instances SET status = 'stopped', ended_at = ?, stop_requested_at = ? WHERE id = ?`, unix(now), unix(now), i.id); err != nil {
				return err
			}
			continue
		}
		if _, err := tx.ExecContext(ctx, `UPDATE instances SET stop_requested_at = ? WHERE id = ?`, unix(now), i.id); err != nil {
			return err
		}
		if err := bumpNode(ctx, tx, i.node); err != nil {
			return err
		}
		*nodes = append(*nodes, i.node)
	}
	return nil
}

// activateReservations starts reservations whose hour has come and gives
// them concrete GPUs, packed onto as few nodes as possible.
func (db *DB) activateReservations(ctx context.Context, tx *sql.Tx, now time.Time, res *TickResult, nodes *[]string) error {
	ids, err := queryIDs(ctx, tx, `SELECT id FROM reservations WHERE status = 'confirmed' AND start_at <= ? AND end_at > ? ORDER BY start_at, id`, unix(now), unix(now))
	if err != nil {
		return err
	}
	for _, id := range ids {
		r, err := reservationFor(ctx, tx, nil, id)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE reservations SET status = 'active' WHERE id = ?`, id); err != nil {
			return err
		}
		if err := db.assignReservationGPUs(ctx, tx, r, r.Count, now, nodes); err != nil {
			return err
		}
		res.Activated++
	}
	return nil
}

// assignReservationGPUs gives a reservation want more GPUs: idle ones first,
// then ones spot instances are giving up. What cannot be found is refunded
// pro rata for the hours left.
func (db *DB) assignReservationGPUs(ctx context.Context, tx *sql.Tx, r *gpuportal.Reservation, want int, now time.Time, nodes *[]string) error {
	policy, err := db.policyFor(ctx, tx, r.Model)
	if err != nil {
		return err
	}
	p, err := loadPool(ctx, tx, r.Model, r.Region, now, policy)
	if err != nil {
		return err
	}
	spotHeld := map[int64]bool{}
	for _, s := range p.spots {
		spotHeld[s.id] = true
	}
	idle := p.freeByNode(p.unreserved)
	gpus, ok := gpuportal.PackAcrossNodes(idle, want)
	if !ok {
		// Take GPUs from spot instances too (they have had, or now get,
		// their notice).
		withSpot := []gpuportal.FreeGPUs{}
		for _, g := range p.healthy {
			if _, r := p.reservedGPU[g.uuid]; r {
				continue
			}
			if holder, held := p.heldBy[g.uuid]; held && !spotHeld[holder] && !db.isInterrupting(ctx, tx, holder) {
				continue
			}
			if n := len(withSpot); n > 0 && withSpot[n-1].Node == g.node {
				withSpot[n-1].GPUs = append(withSpot[n-1].GPUs, g.uuid)
			} else {
				withSpot = append(withSpot, gpuportal.FreeGPUs{Node: g.node, GPUs: []string{g.uuid}})
			}
		}
		gpus, _ = gpuportal.PackAcrossNodes(withSpot, want)
		if len(gpus) < want {
			gpus = nil
			for _, n := range withSpot {
				gpus = append(gpus, n.GPUs...)
			}
			if len(gpus) > want {
				gpus = gpus[:want]
			}
		}
	}
	for _, g := range gpus {
		if _, err := tx.ExecContext(ctx, `INSERT INTO reservation_gpus (gpu_uuid, reservation_id) VALUES (?, ?)`, g, r.ID); err != nil {
			return err
		}
		if holder, held := p.heldBy[g]; held && spotHeld[holder] {
			i, err := instanceFor(ctx, tx, nil, holder)
			if err != nil {
				return err
			}
			if err := db.interrupt(ctx, tx, i, gpuportal.ReasonReservation, now, now.Add(time.Duration(policy.SpotNoticeSeconds)*time.Second), policy.SpotGraceSeconds); err != nil {
				return err
			}
			*nodes = append(*nodes, i.Node)
			spotHeld[holder] = false
		}
	}
	if missing := want - len(gpus); missing > 0 {
		return db.shortReservation(ctx, tx, r, missing, now)
	}
	return nil
}

func (db *DB) isInterrupting(ctx context.Context, tx *sql.Tx, instanceID int64) bool {
	var st string
	_ = tx.QueryRowContext(ctx, `SELECT status FROM instances WHERE id = ?`, instanceID).Scan(&st)
	return st == gpuportal.InstanceInterrupting
}

// shortReservation records that a reservation lacks missing GPUs from now on
// and refunds their share of the hours left.
func (db *DB) shortReservation(ctx context.Context, tx *sql.Tx, r *gpuportal.Reservation, missing int, now time.Time) error {
	if _, err := tx.ExecContext(ctx, `UPDATE reservations SET short_gpus = short_gpus + ? WHERE id = ?`, missing, r.ID); err != nil {
		return err
	}
	left := r.End.Sub(now.Truncate(time.Hour))
	hoursLeft := int((left + time.Hour - 1) / time.Hour)
	refund := r.Price * gpuportal.Fen(missing*hoursLeft) / gpuportal.Fen(r.Count*r.Hours())
	if err := db.notify(ctx, tx, r.UserID, gpuportal.NoteReservationShorted, gpuportal.NoteParams{ReservationID: r.ID, Model: r.Model, Region: r.Region,
		Count: r.Count, Start: r.Start, End: r.End, Missing: missing, Refund: refund}); err != nil {
		return err
	}
	if refund <= 0 {
		return nil
	}
	return db.addLedger(ctx, tx, r.UserID, now, "refund", -refund, &r.ID,
		fmt.Sprintf("Reservation #%d: %d GPUs could not be provided for the last %d h (node failure): refund", r.ID, missing, hoursLeft))
}

// handleNodeFailures deals with work on offline nodes: spot instances are
// interrupted (node_failure; auto-restart ones wait for a new place), other
// instances fail, and active reservations get replacement GPUs.
func (db *DB) handleNodeFailures(ctx context.Context, tx *sql.Tx, now time.Time, res *TickResult, nodes *[]string) error {
	rows, err := tx.QueryContext(ctx, `SELECT `+instanceColumns+` FROM instances WHERE status IN ('pending', 'running', 'interrupting')
		AND node_id IN (SELECT id FROM nodes WHERE online = 0)`)
	if err != nil {
		return err
	}
	var lost []*gpuportal.Instance
	for rows.Next() {
		i, err := scanInstance(rows)
		if err != nil {
			rows.Close()
			return err
		}
		lost = append(lost, i)
	}
	rows.Close()
	for _, i := range lost {
		if i.Kind == gpuportal.KindSpot {
			if i.Status != gpuportal.InstanceInterrupting {
				if err := db.interrupt(ctx, tx, i, gpuportal.ReasonNodeFailure, now, now, 0); err != nil {
					return err
				}
			}
			if err := db.finishAttempt(ctx, tx, i, gpuportal.InstanceInterrupted, nil, "node failure", false, now); err != nil {
				return err
			}
		} else if err := db.finishAttempt(ctx, tx, i, gpuportal.InstanceFailed, nil, "node failure: the node stopped responding", false, now); err != nil {
			return err
		}
		res.NodeFailures++
	}
	// Reservations lose the GPUs of offline nodes and unhealthy GPUs.
	rrows, err := tx.QueryContext(ctx, `SELECT rg.reservation_id, count(*) FROM reservation_gpus rg JOIN gpus g ON g.uuid = rg.gpu_uuid JOIN nodes n ON n.id = g.node_id
		JOIN reservations r ON r.id = rg.reservation_id AND r.status = 'active'
		WHERE n.online = 0 OR g.healthy = 0 GROUP BY rg.reservation_id`)
	if err != nil {
		return err
	}
	lostGPUs := map[int64]int{}
	for rrows.Next() {
		var id int64
		var n int
		if err := rrows.Scan(&id, &n); err != nil {
			rrows.Close()
			return err
		}
		lostGPUs[id] = n
	}
	rrows.Close()
	for id, n := range lostGPUs {
		if _, err := tx.ExecContext(ctx, `DELETE FROM reservation_gpus WHERE reservation_id = ? AND gpu_uuid IN
			(SELECT g.uuid FROM gpus g JOIN nodes nd ON nd.id = g.node_id WHERE nd.online = 0 OR g.healthy = 0)`, id); err != nil {
			return err
		}
		r, err := reservationFor(ctx, tx, nil, id)
		if err != nil {
			return err
		}
		if err := db.assignReservationGPUs(ctx, tx, r, n, now, nodes); err != nil {
			return err
		}
	}
	return nil
}

// preempt gives notice to the fewest spot instances (youngest first on
// ties) that stand in the way of reservations starting within the notice
// horizon (notice + grace + one tick) or of on-demand instances waiting for
// GPUs.
func (db *DB) preempt(ctx context.Context, tx *sql.Tx, now time.Time, res *TickResult, nodes *[]string) error {
	rows, err := tx.QueryContext(ctx, `SELECT DISTINCT model_id, region_id FROM instances WHERE kind = 'spot' AND status IN ('pending', 'running') AND node_id IS NOT NULL`)
	if err != nil {
		return err
	}
	var pairs [][2]string
	for rows.Next() {
		var m, r string
		if err := rows.Scan(&m, &r); err != nil {
			rows.Close()
			return err
		}
		pairs = append(pairs, [2]string{m, r})
	}
	rows.Close()
	for _, pr := range pairs {
		policy, err := db.policyFor(ctx, tx, pr[0])
		if err != nil {
			return err
		}
		p, err := loadPool(ctx, tx, pr[0], pr[1], now, policy)
		if err != nil {
			return err
		}
		supply := len(p.healthy)
		forReservations := p.reservedMax + p.onDemand + p.spotGPUs() - supply
		total := forReservations + p.onDemandWait
		chosen := map[int64]bool{}
		if total > 0 {
			if err := db.giveNotice(ctx, tx, p, policy, total, forReservations, now, chosen, res, nodes); err != nil {
				return err
			}
		}
		// Spot instances waiting for GPUs take them from job tasks.
		if need := p.spotWait - p.spotRoom(); need > 0 {
			var tasks []gpuportal.SpotCandidate
			for _, s := range p.spots {
				if s.jobTask && !chosen[s.id] {
					tasks = append(tasks, gpuportal.SpotCandidate{ID: s.id, Count: s.count, StartedAt: s.startedAt})
				}
			}
			deadline := now.Add(time.Duration(policy.SpotNoticeSeconds) * time.Second)
			for _, v := range gpuportal.ChooseVictims(tasks, need) {
				i, err := instanceFor(ctx, tx, nil, v.ID)
				if err != nil {
					return err
				}
				if err := db.interrupt(ctx, tx, i, gpuportal.ReasonFairShare, now, deadline, policy.SpotGraceSeconds); err != nil {
					return err
				}
				*nodes = append(*nodes, i.Node)
				res.Interrupted++
			}
		}
	}
	return nil
}

// giveNotice interrupts the fewest spot instances (youngest first) that
// free total GPUs: the first forReservations of them for reservations, the
// rest for on-demand instances waiting.
func (db *DB) giveNotice(ctx context.Context, tx *sql.Tx, p *pool, policy gpuportal.Policy, total, forReservations int, now time.Time, chosen map[int64]bool, res *TickResult, nodes *[]string) error {
	cands := make([]gpuportal.SpotCandidate, len(p.spots))
	byID := map[int64]poolInstance{}
	for k, s := range p.spots {
		cands[k] = gpuportal.SpotCandidate{ID: s.id, Count: s.count, StartedAt: s.startedAt}
		byID[s.id] = s
	}
	// A notice is issued at the last tick before start − notice − grace
	// (the horizon), so the workload gets exactly the policy's notice
	// and its GPUs are free by the reservation's start.
	deadline := now.Add(time.Duration(policy.SpotNoticeSeconds) * time.Second)
	covered := 0
	for _, v := range gpuportal.ChooseVictims(cands, total) {
		reason := gpuportal.ReasonReservation
		if covered >= forReservations {
			reason = gpuportal.ReasonOnDemand
		}
		covered += v.Count
		i, err := instanceFor(ctx, tx, nil, v.ID)
		if err != nil {
			return err
		}
		if err := db.interrupt(ctx, tx, i, reason, now, deadline, policy.SpotGraceSeconds); err != nil {
			return err
		}
		chosen[v.ID] = true
		*nodes = append(*nodes, byID[v.ID].node)
		res.Interrupted++
	}
	return nil
}

// place finds GPUs for pending instances: reserved ones on their
// reservation's GPUs, then on-demand, then spot (auto-restarted ones
// included), oldest first.
func (db *DB) place(ctx context.Context, tx *sql.Tx, now time.Time, res *TickResult, nodes *[]string) error {
	rows, err := tx.QueryContext(ctx, `SELECT `+instanceColumns+` FROM instances WHERE status = 'pending' AND node_id IS NULL AND stop_requested_at IS NULL
		ORDER BY CASE kind WHEN 'reserved' THEN 0 WHEN 'on_demand' THEN 1 ELSE 2 END, id`)
	if err != nil {
		return err
	}
	var pending []*gpuportal.Instance
	for rows.Next() {
		i, err := scanInstance(rows)
		if err != nil {
			rows.Close()
			return err
		}
		pending = append(pending, i)
	}
	rows.Close()
	pools := map[[2]string]*pool{}
	for _, i := range pending {
		key := [2]string{i.Model, i.Region}
		p := pools[key]
		if p == nil {
			policy, err := db.policyFor(ctx, tx, i.Model)
			if err != nil {
				return err
			}
			if p, err = loadPool(ctx, tx, i.Model, i.Region, now, policy); err != nil {
				return err
			}
			pools[key] = p
		}
		var node string
		var gpus []string
		var ok bool
		switch i.Kind {
		case gpuportal.KindReserved:
			node, gpus, ok = gpuportal.PlaceOnOneNode(p.freeByNode(func(g poolGPU) bool { return p.reservedGPU[g.uuid] == *i.ReservationID }), i.Count)
		case gpuportal.KindOnDemand:
			node, gpus, ok = p.placeOnDemand(i.Count)
		default:
			node, gpus, ok = p.placeSpot(i.Count, db.lastNode(ctx, tx, i.ID))
		}
		if !ok {
			continue
		}
		for _, g := range gpus {
			if _, err := tx.ExecContext(ctx, `INSERT INTO instance_gpus (gpu_uuid, instance_id) VALUES (?, ?)`, g, i.ID); err != nil {
				return err
			}
		}
		if _, err := tx.ExecContext(ctx, `UPDATE instances SET node_id = ?, attempt = attempt + 1, notice_at = NULL, notice_wall_at = NULL, deadline_at = NULL,
			interrupt_reason = NULL WHERE id = ?`, node, i.ID); err != nil {
			return err
		}
		p.hold(i.ID, gpus)
		if i.Restarts > 0 && i.Kind == gpuportal.KindSpot {
			if err := db.notify(ctx, tx, i.UserID, gpuportal.NoteInstanceRestarted, gpuportal.NoteParams{InstanceID: i.ID, Model: i.Model, Region: i.Region, Count: i.Count}); err != nil {
				return err
			}
		}
		switch i.Kind {
		case gpuportal.KindOnDemand:
			p.onDemand += i.Count
		case gpuportal.KindSpot:
			p.spots = append(p.spots, poolInstance{id: i.ID, count: i.Count, node: node, startedAt: now})
		}
		if err := bumpNode(ctx, tx, node); err != nil {
			return err
		}
		*nodes = append(*nodes, node)
		res.Placed++
	}
	return nil
}

func (db *DB) lastNode(ctx context.Context, tx *sql.Tx, instanceID int64) string {
	var n sql.NullString
	_ = tx.QueryRowContext(ctx, `SELECT last_node_id FROM instances WHERE id = ?`, instanceID).Scan(&n)
	return n.String
}
