package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"gpuportal"
)

// pool is a snapshot of one model's GPUs in one region, for placing
// instances and deciding interruptions.
type pool struct {
	model, region string
	now           time.Time
	policy        gpuportal.Policy
	healthy       []poolGPU        // healthy GPUs on online, non-draining nodes
	heldBy        map[string]int64 // gpu → instance holding it
	reservedGPU   map[string]int64 // gpu → active reservation it is assigned to
	spots         []poolInstance   // placed spot instances not yet interrupted
	onDemand      int              // GPUs of placed on-demand instances
	onDemandWait  int              // GPUs of on-demand instances waiting for a place
	spotWait      int              // GPUs of spot instances (not job tasks) waiting for a place
	reservedMax   int              // most GPUs reserved in any hour of the spot horizon
	reservedDay   int              // most GPUs reserved in any hour of the next 24 h
}

type poolGPU struct {
	uuid, node string
	idx        int
}

type poolInstance struct {
	id        int64
	count     int
	node      string
	startedAt time.Time
	jobTask   bool // an attempt of a job's task: spot work that yields to other spot work
}

// spotHorizon is how far ahead a spot instance must be safe to be placed:
// its notice and grace, plus a minute for the scheduler's next tick.
func spotHorizon(p gpuportal.Policy) time.Duration {
	return time.Duration(p.SpotNoticeSeconds+p.SpotGraceSeconds+60) * time.Second
}

func loadPool(ctx context.Context, q queryer, model, region string, now time.Time, policy gpuportal.Policy) (*pool, error) {
	p := &pool{model: model, region: region, now: now, policy: policy, heldBy: map[string]int64{}, reservedGPU: map[string]int64{}}
	rows, err := q.QueryContext(ctx, `SELECT g.uuid, g.node_id, g.idx FROM gpus g JOIN nodes n ON n.id = g.node_id
		WHERE g.model_id = ? AND n.region_id = ? AND g.healthy = 1 AND n.online = 1 AND n.drain = 0 ORDER BY g.node_id, g.idx`, model, region)
	if err != nil {
		return nil, fmt.Errorf("load pool: %w", err)
	}
	for rows.Next() {
		var g poolGPU
		if err := rows.Scan(&g.uuid, &g.node, &g.idx); err != nil {
			rows.Close()
			return nil, err
		}
		p.healthy = append(p.healthy, g)
	}
	rows.Close()
	// Driven from the small tables of live assignments (CROSS JOIN keeps
	// SQLite from starting at the ever-growing instances or reservations).
	if err := gpuOwners(ctx, q, p.heldBy, `SELECT ig.gpu_uuid, ig.instance_id FROM instance_gpus ig CROSS JOIN gpus g
		WHERE g.uuid = ig.gpu_uuid AND g.model_id = ?`, model); err != nil {
		return nil, err
	}
	if err := gpuOwners(ctx, q, p.reservedGPU, `SELECT rg.gpu_uuid, rg.reservation_id FROM reservation_gpus rg CROSS JOIN gpus g
		JOIN reservations r ON r.id = rg.reservation_id AND r.status = 'active'
		WHERE g.uuid = rg.gpu_uuid AND g.model_id = ?`, model); err != nil {
		return nil, err
	}
	rows, err = q.QueryContext(ctx, `SELECT id, kind, count, coalesce(node_id, ''), coalesce(started_at, created_at), job_id IS NOT NULL FROM instances
		WHERE model_id = ? AND region_id = ? AND kind IN ('spot', 'on_demand') AND status IN ('pending', 'running')`, model, region)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var in poolInstance
		var kind string
		var started int64
		if err := rows.Scan(&in.id, &kind, &in.count, &in.node, &started, &in.jobTask); err != nil {
			rows.Close()
			return nil, err
		}
		in.startedAt = fromUnix(started)
		switch {
		case kind == gpuportal.KindOnDemand && in.node == "":
			p.onDemandWait += in.count
		case kind == gpuportal.KindOnDemand:
			p.onDemand += in.count
		case in.node != "":
			p.spots = append(p.spots, in)
		default:
			p.spotWait += in.count
		}
	}
	rows.Close()
	if p.reservedMax, err = maxReserved(ctx, q, model, region, now, now.Add(spotHorizon(policy))); err != nil {
		return nil, err
	}
	if p.reservedDay, err = maxReserved(ctx, q, model, region, now, now.Add(24*time.Hour)); err != nil {
		return nil, err
	}
	return p, nil
}

// gpuOwners fills into with the (gpu, owner id) rows of query.
func gpuOwners(ctx context.Context, q queryer, into map[string]int64, query string, args ...any) error {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return fmt.Errorf("load GPU owners: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var g string
		var id int64
		if err := rows.Scan(&g, &id); err != nil {
			return err
		}
		into[g] = id
	}
	return rows.Err()
}

// maxReserved is the most GPUs reserved in any hour that overlaps [from, to].
func maxReserved(ctx context.Context, q queryer, model, region string, from, to time.Time) (int, error) {
	var n int
	err := q.QueryRowContext(ctx, `SELECT coalesce(max(reserved), 0) FROM hourly_usage WHERE model_id = ? AND region_id = ? AND hour >= ? AND hour <= ?`,
		model, region, unix(from.Truncate(time.Hour)), unix(to)).Scan(&n)
	return n, err
}

func (p *pool) spotGPUs() int {
	n := 0
	for _, s := range p.spots {
		n += s.count
	}
	return n
}

// spotRoom is how many more GPUs spot instances may take now without being
// interrupted within the horizon.
func (p *pool) spotRoom() int {
	return max(0, len(p.healthy)-p.reservedMax-p.onDemand-p.onDemandWait-p.spotGPUs())
}

// jobTaskGPUs is how many GPUs job tasks hold on spot: a spot launch may
// take them (the tasks go back to their queue).
func (p *pool) jobTaskGPUs() int {
	n := 0
	for _, s := range p.spots {
		if s.jobTask {
			n += s.count
		}
	}
	return n
}

// jobRoom is how many GPUs job tasks may take now: spot room that no
// waiting spot instance needs.
func (p *pool) jobRoom() int { return max(0, p.spotRoom()-p.spotWait) }

// freeByNode lists the GPUs nobody holds, per node.
func (p *pool) freeByNode(allowed func(poolGPU) bool) []gpuportal.FreeGPUs {
	var out []gpuportal.FreeGPUs
	for _, g := range p.healthy {
		if _, held := p.heldBy[g.uuid]; held {
			continue
		}
		if !allowed(g) {
			continue
		}
		if n := len(out); n > 0 && out[n-1].Node == g.node {
			out[n-1].GPUs = append(out[n-1].GPUs, g.uuid)
		} else {
			out = append(out, gpuportal.FreeGPUs{Node: g.node, GPUs: []string{g.uuid}})
		}
	}
	return out
}

func (p *pool) unreserved(g poolGPU) bool { _, r := p.reservedGPU[g.uuid]; return !r }

// placeSpot finds count idle GPUs on one node for a spot instance, away
// from avoid (the node it was just interrupted on) when another fits.
func (p *pool) placeSpot(count int, avoid string) (string, []string, bool) {
	if p.spotRoom() < count {
		return "", nil, false
	}
	if avoid != "" {
		if node, gpus, ok := gpuportal.PlaceOnOneNode(p.freeByNode(func(g poolGPU) bool { return g.node != avoid && p.unreserved(g) }), count); ok {
			return node, gpus, ok
		}
	}
	return gpuportal.PlaceOnOneNode(p.freeByNode(p.unreserved), count)
}

// placeOnDemand finds count free GPUs on one node for an on-demand instance,
// which must not take what reservations of the next day need.
func (p *pool) placeOnDemand(count int) (string, []string, bool) {
	if len(p.healthy)-p.reservedDay-p.onDemand < count {
		return "", nil, false
	}
	return gpuportal.PlaceOnOneNode(p.freeByNode(p.unreserved), count)
}

func (p *pool) hold(id int64, gpus []string) {
	for _, g := range gpus {
		p.heldBy[g] = id
	}
}

// SafeUntil is the earliest hour at which the reservation book would
// reclaim GPUs from spot instances if one more of k GPUs ran now (k = 0:
// as things are). Nil when nothing booked in the next 90 days would. It
// reads two aggregates rather than the whole pool: the interruption-rates
// answer and every spot launch ask for it.
func (db *DB) SafeUntil(ctx context.Context, model, region string, k int) (*time.Time, error) {
	healthy, err := db.healthyGPUs(ctx, db.read, model, region)
	if err != nil {
		return nil, err
	}
	var onDemand, spot int
	if err := db.read.QueryRowContext(ctx, `SELECT coalesce(sum(CASE WHEN kind = 'on_demand' THEN count ELSE 0 END), 0),
		coalesce(sum(CASE WHEN kind = 'spot' AND node_id IS NOT NULL THEN count ELSE 0 END), 0)
		FROM instances WHERE model_id = ? AND region_id = ? AND kind IN ('spot', 'on_demand') AND status IN ('pending', 'running')`,
		model, region).Scan(&onDemand, &spot); err != nil {
		return nil, fmt.Errorf("safe until: %w", err)
	}
	return firstReclaimedHour(ctx, db.read, model, region, db.now(), healthy-onDemand-spot-k)
}

// firstReclaimedHour is the first hour of the next 90 days that books more
// than threshold GPUs (now, when threshold is negative), or nil.
func firstReclaimedHour(ctx context.Context, q queryer, model, region string, now time.Time, threshold int) (*time.Time, error) {
	if threshold < 0 {
		t := now
		return &t, nil
	}
	var hour int64
	err := q.QueryRowContext(ctx, `SELECT hour FROM hourly_usage WHERE model_id = ? AND region_id = ? AND hour >= ? AND hour < ? AND reserved > ? ORDER BY hour LIMIT 1`,
		model, region, unix(now.Truncate(time.Hour)), unix(now.Add(90*24*time.Hour)), threshold).Scan(&hour)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	t := fromUnix(hour)
	if t.Before(now) {
		t = now
	}
	return &t, nil
}
