package store

import (
	"context"
	"fmt"
	"strings"
	"time"

	"gpuportal"
)

// The admin overview's types are the root package's.
type (
	GPUStates = gpuportal.GPUStates
	DayUse    = gpuportal.DayUse
	Overview  = gpuportal.Overview
)

// GPUStatesNow counts each model's GPUs in each region by what they do
// now: reserved, on-demand, spot, idle, unhealthy or offline (the admin
// overview, and the landing page's availability).
func (db *DB) GPUStatesNow(ctx context.Context) ([]GPUStates, error) {
	var states []GPUStates
	rows, err := db.read.QueryContext(ctx, `SELECT g.model_id, n.region_id,
		CASE WHEN n.online = 0 THEN 'offline' WHEN g.healthy = 0 THEN 'unhealthy'
		     WHEN ar.id IS NOT NULL THEN 'reserved' WHEN i.kind = 'on_demand' THEN 'on_demand' WHEN i.kind = 'spot' THEN 'spot'
		     WHEN i.kind = 'reserved' THEN 'reserved' ELSE 'idle' END AS state, count(*)
		FROM gpus g JOIN nodes n ON n.id = g.node_id
		LEFT JOIN reservation_gpus rg ON rg.gpu_uuid = g.uuid
		LEFT JOIN reservations ar ON ar.id = rg.reservation_id AND ar.status = 'active'
		LEFT JOIN instance_gpus ig ON ig.gpu_uuid = g.uuid LEFT JOIN instances i ON i.id = ig.instance_id
		GROUP BY g.model_id, n.region_id, state ORDER BY g.model_id, n.region_id`)
	if err != nil {
		return nil, fmt.Errorf("GPUs by state: %w", err)
	}
	index := map[[2]string]int{}
	for rows.Next() {
		var model, region, state string
		var n int
		if err := rows.Scan(&model, &region, &state, &n); err != nil {
			rows.Close()
			return nil, err
		}
		k := [2]string{model, region}
		if _, ok := index[k]; !ok {
			index[k] = len(states)
			states = append(states, GPUStates{Model: model, Region: region})
		}
		s := &states[index[k]]
		switch state {
		case "offline":
			s.Offline += n
		case "unhealthy":
			s.Unhealthy += n
		case "reserved":
			s.Reserved += n
		case "on_demand":
			s.OnDemand += n
		case "spot":
			s.Spot += n
		default:
			s.Idle += n
		}
	}
	rows.Close()
	return states, rows.Err()
}

// Overview builds the admin overview: GPUs by state now, the book's use of
// the next 14 days, and revenue of the last 30 days by product.
func (db *DB) Overview(ctx context.Context) (*Overview, error) {
	now := db.now()
	o := &Overview{Next14: map[string][]DayUse{}, Revenue: map[string]gpuportal.Fen{}}
	var err error
	if o.States, err = db.GPUStatesNow(ctx); err != nil {
		return nil, err
	}
	pol, err := db.Policies(ctx)
	if err != nil {
		return nil, err
	}
	day0 := time.Date(now.In(db.Location).Year(), now.In(db.Location).Month(), now.In(db.Location).Day(), 0, 0, 0, 0, db.Location)
	for _, s := range o.States {
		healthy, err := db.HealthyGPUs(ctx, s.Model, s.Region)
		if err != nil {
			return nil, err
		}
		capacity := gpuportal.BookableGPUs(healthy, pol.For(s.Model).ReservablePercent)
		for d := 0; d < 14; d++ {
			from, to := day0.AddDate(0, 0, d), day0.AddDate(0, 0, d+1)
			var used int
			if err := db.read.QueryRowContext(ctx, `SELECT coalesce(sum(reserved), 0) FROM hourly_usage WHERE model_id = ? AND region_id = ? AND hour >= ? AND hour < ?`,
				s.Model, s.Region, unix(from), unix(to)).Scan(&used); err != nil {
				return nil, err
			}
			o.Next14[s.Model+"/"+s.Region] = append(o.Next14[s.Model+"/"+s.Region], DayUse{Day: from, Reserved: used, Capacity: capacity * int(to.Sub(from)/time.Hour)})
		}
	}
	// Revenue is what customers were charged less what went back to them
	// (gpuportal.RevenueKinds): a top-up or a credit is their money, not
	// the platform's.
	kinds := "'" + strings.Join(gpuportal.RevenueKinds, "', '") + "'"
	rev, err := db.read.QueryContext(ctx, `SELECT CASE WHEN l.instance_id IS NOT NULL THEN i.kind WHEN l.kind = 'volume' THEN 'volumes' ELSE 'reservations' END, sum(l.amount_fen)
		FROM ledger_entries l LEFT JOIN instances i ON i.id = l.instance_id WHERE l.at >= ? AND l.kind IN (`+kinds+`) GROUP BY 1`, unix(now.Add(-30*24*time.Hour)))
	if err != nil {
		return nil, fmt.Errorf("revenue: %w", err)
	}
	defer rev.Close()
	for rev.Next() {
		var product string
		var sum gpuportal.Fen
		if err := rev.Scan(&product, &sum); err != nil {
			return nil, err
		}
		o.Revenue[product] = sum
	}
	return o, rev.Err()
}
