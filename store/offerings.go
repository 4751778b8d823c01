package store

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"time"

	"gpuportal"
)

// reservedByHour reads how many GPUs the book holds in each hour of
// [from, to) for a model in a region, by the hour's Unix time (hours with
// nothing booked are absent). It reads one row per hour asked for,
// whatever the size of the book.
func reservedByHour(ctx context.Context, q queryer, model, region string, from, to time.Time) (map[int64]int, error) {
	type usage struct {
		hour     int64
		reserved int
	}
	rows, err := scanAll(ctx, q, func(r *sql.Rows, u *usage) error { return r.Scan(&u.hour, &u.reserved) },
		`SELECT hour, reserved FROM hourly_usage WHERE model_id = ? AND region_id = ? AND hour >= ? AND hour < ?`,
		model, region, unix(from), unix(to))
	if err != nil {
		return nil, fmt.Errorf("read hourly usage: %w", err)
	}
	out := make(map[int64]int, len(rows))
	for _, u := range rows {
		out[u.hour] = u.reserved
	}
	return out, nil
}

// hourGrid is the book of [from, to) as the offering and extension rules
// read it: the GPUs free to book in each hour, and the prices.
func (db *DB) hourGrid(ctx context.Context, q queryer, model *gpuportal.Model, region string, policy gpuportal.Policy, from, to time.Time) (gpuportal.HourGrid, error) {
	g := gpuportal.HourGrid{From: from, Model: *model, Policy: policy, Loc: db.Location}
	capacity, err := db.reservableNow(ctx, q, model.ID, region, policy, false)
	if err != nil {
		return g, err
	}
	reserved, err := reservedByHour(ctx, q, model.ID, region, from, to)
	if err != nil {
		return g, err
	}
	g.Free = make([]int, 0, int(to.Sub(from)/time.Hour))
	for t := from; t.Before(to); t = t.Add(time.Hour) {
		g.Free = append(g.Free, gpuportal.FreeInHour(capacity, reserved[unix(t)]))
	}
	return g, nil
}

// Offerings answers "when can I get count GPUs for duration hours in this
// range, and for how much?": the windows that fit every hour now, ranked
// as asked (gpuportal.FindOfferings). Booking one is an ordinary Book.
func (db *DB) Offerings(ctx context.Context, req gpuportal.OfferingRequest) ([]gpuportal.Offering, error) {
	model, policy, err := db.catalogEntry(ctx, db.read, req.Model, req.Region)
	if err != nil {
		return nil, err
	}
	now := db.now()
	if req, err = gpuportal.NormalizeOfferingRequest(req, policy, now); err != nil {
		return nil, err
	}
	g, err := db.hourGrid(ctx, db.read, model, req.Region, policy, req.Earliest, req.LatestEnd)
	if err != nil {
		return nil, err
	}
	return gpuportal.FindOfferings(g, req, now), nil
}

// Alternatives is what to offer next to a window that is full: windows
// of the same count and length near it, and the most GPUs free in every
// hour of the window asked for.
type Alternatives struct {
	Offerings []gpuportal.Offering `json:"offerings"`
	MostFree  int                  `json:"most_free"`
}

// AlternativesReach is how far either side of a full window alternatives
// are looked for.
const AlternativesReach = 7 * 24 * time.Hour

// AlternativesFor finds, for a booking request whose window is full, the
// nearest window that starts earlier, the nearest that starts later and
// the cheapest within AlternativesReach either side (each once, in that
// order), and the most GPUs the asked hours have free.
func (db *DB) AlternativesFor(ctx context.Context, req gpuportal.BookingRequest) (Alternatives, error) {
	out := Alternatives{Offerings: []gpuportal.Offering{}}
	model, policy, err := db.catalogEntry(ctx, db.read, req.Model, req.Region)
	if err != nil {
		return out, err
	}
	start, end := req.Start.UTC(), req.End.UTC()
	hours := int(end.Sub(start) / time.Hour)
	if hours < 1 {
		return out, nil
	}
	asked, err := db.hourGrid(ctx, db.read, model, req.Region, policy, start, end)
	if err != nil {
		return out, err
	}
	out.MostFree = gpuportal.MostFree(asked.Free)
	now := db.now()
	search, err := gpuportal.NormalizeOfferingRequest(gpuportal.OfferingRequest{
		Model: req.Model, Region: req.Region, Count: req.Count, DurationHours: hours,
		Earliest: start.Add(-AlternativesReach), LatestEnd: end.Add(AlternativesReach),
		Sort: gpuportal.OfferingsNear, Near: start, Limit: gpuportal.MaxOfferings,
	}, policy, now)
	if err != nil {
		return out, nil // no window of this shape can be booked at all: nothing to suggest
	}
	g, err := db.hourGrid(ctx, db.read, model, req.Region, policy, search.Earliest, search.LatestEnd)
	if err != nil {
		return out, err
	}
	near := gpuportal.FindOfferings(g, search, now)
	search.Sort, search.Limit = gpuportal.OfferingsByPrice, 1
	cheapest := gpuportal.FindOfferings(g, search, now)
	add := func(o gpuportal.Offering) {
		for _, have := range out.Offerings {
			if have.Start.Equal(o.Start) {
				return
			}
		}
		out.Offerings = append(out.Offerings, o)
	}
	if k := slices.IndexFunc(near, func(o gpuportal.Offering) bool { return o.Start.Before(start) }); k >= 0 {
		add(near[k])
	}
	if k := slices.IndexFunc(near, func(o gpuportal.Offering) bool { return o.Start.After(start) }); k >= 0 {
		add(near[k])
	}
	if len(cheapest) > 0 {
		add(cheapest[0])
	}
	return out, nil
}
