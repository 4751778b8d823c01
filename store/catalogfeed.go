package store

import (
	"context"
	"fmt"

	"gpuportal"
)

// Catalog is GET /catalog: one row per model and region with GPUs, what
// it costs, what is free now, how often spot was interrupted and when a
// whole node can next be booked. It reads the fleet once and each pair's
// rates and offerings; the web layer caches it.
func (db *DB) Catalog(ctx context.Context) ([]gpuportal.CatalogEntry, error) {
	states, err := db.GPUStatesNow(ctx)
	if err != nil {
		return nil, err
	}
	shape, err := db.FleetShape(ctx)
	if err != nil {
		return nil, err
	}
	models, err := db.Models(ctx)
	if err != nil {
		return nil, err
	}
	pol, err := db.Policies(ctx)
	if err != nil {
		return nil, err
	}
	now := db.now()
	out := []gpuportal.CatalogEntry{}
	for _, st := range states {
		var model *gpuportal.Model
		for k := range models {
			if models[k].ID == st.Model {
				model = &models[k]
			}
		}
		if model == nil {
			continue
		}
		policy := pol.For(model.ID)
		e := gpuportal.CatalogEntry{Model: st.Model, Region: st.Region, GPUName: model.Name, GPUMemoryGiB: model.MemoryGiB,
			Price: policy.HourPrice(*model, gpuportal.KindOnDemand), SpotPrice: policy.HourPrice(*model, gpuportal.KindSpot),
			SpotFreeNow: st.Idle, ComputedAt: now}
		for _, part := range shape {
			if part.Model == st.Model && part.Region == st.Region {
				e.GPUsPerNode = max(e.GPUsPerNode, part.GPUsPerNode)
			}
		}
		healthy := st.Idle + st.Reserved + st.OnDemand + st.Spot
		most, err := mostReservedFrom(ctx, db, db.read, st.Model, st.Region, now)
		if err != nil {
			return nil, err
		}
		room := gpuportal.BookableGPUs(healthy, policy.ReservablePercent) - st.OnDemand - most
		e.FreeNow = max(0, min(st.Idle+st.Spot, room))
		rates, err := db.Rates(ctx, st.Model, st.Region, 1)
		if err != nil {
			return nil, fmt.Errorf("catalog: rates of %s in %s: %w", st.Model, st.Region, err)
		}
		e.SpotInterruptionRate30d = rates.Trailing.Rate
		if e.GPUsPerNode > 0 {
			offers, err := db.Offerings(ctx, gpuportal.OfferingRequest{Model: st.Model, Region: st.Region, Count: e.GPUsPerNode,
				DurationHours: policy.MinDurationHours, Sort: gpuportal.OfferingsByStart, Limit: 1})
			if err != nil && gpuportal.ErrorCode(err) == gpuportal.EINTERNAL {
				return nil, fmt.Errorf("catalog: offerings of %s in %s: %w", st.Model, st.Region, err)
			}
			if len(offers) > 0 {
				start := offers[0].Start
				e.NextFreeStart = &start
			}
		}
		out = append(out, e)
	}
	return out, nil
}
