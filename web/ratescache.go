package web

import (
	"context"
	"strconv"
	"sync"
	"time"

	"gpuportal"
)

// ratesTTL is how long an interruption-rates answer is reused. Computing
// one reads a year of roll-ups (milliseconds); cached, the route cannot be
// used to load the portal, and a minute-old rate is as true as a fresh one.
const ratesTTL = time.Minute

// ratesCache keeps answers per model, region, count and business-clock
// minute (a moved test clock asks afresh). Only answers for real catalog
// entries are kept, so its size is bounded by the catalog.
type ratesCache struct {
	mu      sync.Mutex
	entries map[string]ratesEntry
}

type ratesEntry struct {
	rates   *gpuportal.InterruptionRates
	expires time.Time // wall clock
}

// cachedRates answers GET /interruption-rates, the rates page and the
// launch form.
func (s *Server) cachedRates(ctx context.Context, model, region string, count int) (*gpuportal.InterruptionRates, error) {
	key := model + "\x00" + region + "\x00" + strconv.Itoa(count) + "\x00" + strconv.FormatInt(s.cfg.Clock.Now().Unix()/60, 10)
	now := s.cfg.WallClock.Now()
	c := &s.ratesCache
	c.mu.Lock()
	if e, ok := c.entries[key]; ok && now.Before(e.expires) {
		c.mu.Unlock()
		return e.rates, nil
	}
	c.mu.Unlock()
	r, err := s.db.Rates(ctx, model, region, count)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil {
		c.entries = map[string]ratesEntry{}
	}
	for k, e := range c.entries {
		if !now.Before(e.expires) {
			delete(c.entries, k)
		}
	}
	c.entries[key] = ratesEntry{rates: r, expires: now.Add(ratesTTL)}
	return r, nil
}
