package web

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"

	"gpuportal"
	"gpuportal/simulate"
	"gpuportal/store"
	"gpuportal/web/templates"
)

// The what-if (DESIGN §4, admin): before saving a policy change, an admin
// simulates a week of the current fleet under the policies in force and
// under the draft, side by side. Runs take seconds, so the page starts one
// and polls its progress; one runs at a time per portal.

// whatIfDays is how long a what-if simulates (unless Config.WhatIfDays
// says otherwise); whatIfMaxGPUs bounds the fleet it simulates (a bigger
// one is sampled), so a run stays seconds.
const (
	whatIfDays    = 7
	whatIfMaxGPUs = 96
)

// whatIfRun is one comparison under way or done.
type whatIfRun struct {
	id       string
	started  time.Time
	progress [2]atomic.Uint64 // per simulation, in thousandths
	done     chan struct{}
	result   whatIfResult
}

// whatIfResult is the pair of reports (the API's answer).
type whatIfResult struct {
	Days    int              `json:"days"`
	Sample  int              `json:"sample"` // 1: the whole fleet; k: every k-th node
	Current *simulate.Report `json:"current"`
	Draft   *simulate.Report `json:"draft"`
	err     error
}

func (r *whatIfRun) fraction() float64 {
	return float64(r.progress[0].Load()+r.progress[1].Load()) / 2000
}

// whatIfRuns keeps the runs of the last half hour.
type whatIfRuns struct {
	days int // how long a what-if simulates (Config.WhatIfDays)
	mu   sync.Mutex
	runs map[string]*whatIfRun
}

// start runs the comparison in the background, unless one is running.
func (w *whatIfRuns) start(scenario simulate.Scenario, sample int, current, draft gpuportal.Policies, loc *time.Location, now time.Time) (*whatIfRun, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.runs == nil {
		w.runs = map[string]*whatIfRun{}
	}
	for id, r := range w.runs {
		select {
		case <-r.done:
			if now.Sub(r.started) > 30*time.Minute {
				delete(w.runs, id)
			}
		default:
			return nil, gpuportal.Errorf(gpuportal.ECONFLICT, "A simulation is already running; wait for it to finish.")
		}
	}
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	r := &whatIfRun{id: hex.EncodeToString(b), started: now, done: make(chan struct{})}
	w.runs[r.id] = r
	go func() {
		defer close(r.done)
		r.result = compare(context.Background(), scenario, sample, w.days, current, draft, loc, r)
	}()
	return r, nil
}

func (w *whatIfRuns) get(id string) (*whatIfRun, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	r, ok := w.runs[id]
	return r, ok
}

// compare simulates the scenario under both policies at once (one core
// each).
func compare(ctx context.Context, scenario simulate.Scenario, sample, days int, current, draft gpuportal.Policies, loc *time.Location, run *whatIfRun) whatIfResult {
	out := whatIfResult{Days: days, Sample: sample}
	var wg sync.WaitGroup
	var errs [2]error
	for k, p := range []*gpuportal.Policies{&current, &draft} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Both runs see the demand as it is under the policies in force:
			// the draft's spot prices move its spot demand.
			opt := simulate.Options{Scenario: scenario, Days: days, Policies: p, Reference: &current, Location: loc}
			if run != nil {
				opt.Progress = func(done float64) { run.progress[k].Store(uint64(done * 1000)) }
			}
			r, err := simulate.Run(ctx, opt)
			errs[k] = err
			if k == 0 {
				out.Current = r
			} else {
				out.Draft = r
			}
			if run != nil {
				run.progress[k].Store(1000)
			}
		}()
	}
	wg.Wait()
	if errs[0] != nil {
		out.err = fmt.Errorf("simulate the current policies: %w", errs[0])
	} else if errs[1] != nil {
		out.err = fmt.Errorf("simulate the draft: %w", errs[1])
	}
	return out
}

// fleetScenario is a typical week's demand on the fleet in service.
func (s *Server) fleetScenario(ctx context.Context) (simulate.Scenario, int, error) {
	shape, err := s.db.FleetShape(ctx)
	if err != nil {
		return simulate.Scenario{}, 0, err
	}
	if len(shape) == 0 {
		return simulate.Scenario{}, 0, gpuportal.Errorf(gpuportal.ECONFLICT, "There are no GPUs in service to simulate.")
	}
	parts := make([]simulate.FleetPart, len(shape))
	for k, p := range shape {
		parts[k] = simulate.FleetPart{Model: p.Model, Region: p.Region, Nodes: p.Nodes, GPUsPerNode: p.GPUsPerNode}
	}
	scenario, sample := simulate.ForFleet(parts, whatIfMaxGPUs)
	return scenario, sample, nil
}

// handleWhatIf starts a what-if from the policy editor's form: the draft
// is the form; a draft with problems shows them instead.
func (s *Server) handleWhatIf(c echo.Context) error {
	if err := c.Request().ParseForm(); err != nil {
		return gpuportal.Errorf(gpuportal.EINVALID, "The form could not be read.")
	}
	draft, errs, err := s.parsePolicyDraft(c)
	if err != nil {
		return err
	}
	elasticity, eerr := parseElasticity(c.Request().PostForm.Get("spot_price_elasticity"))
	var fieldErr *gpuportal.Error
	if errors.As(eerr, &fieldErr) {
		errs = append(errs, fieldErr)
	} else if eerr != nil {
		return eerr
	}
	if len(errs) > 0 {
		ed, err := s.policyEditor(c, draft, c.Request().PostForm, errs)
		if err != nil {
			return err
		}
		return s.render(c, http.StatusBadRequest, templates.WhatIfProblems(ed))
	}
	run, err := s.startWhatIf(c, draft, elasticity)
	if err != nil {
		return err
	}
	return s.render(c, http.StatusAccepted, templates.WhatIf(s.whatIfView(run)))
}

// handleWhatIfStatus is the progress of a run, or its comparison when done.
func (s *Server) handleWhatIfStatus(c echo.Context) error {
	run, ok := s.whatIfs.get(c.Param("id"))
	if !ok {
		return gpuportal.Errorf(gpuportal.ENOTFOUND, "This simulation is gone; start another.")
	}
	return s.render(c, http.StatusOK, templates.WhatIf(s.whatIfView(run)))
}

// apiWhatIf simulates the policies document in the body against the
// policies in force and answers both reports (it waits for them).
func (s *Server) apiWhatIf(c echo.Context) error {
	elasticity, err := parseElasticity(c.QueryParam("spot_price_elasticity"))
	if err != nil {
		return err
	}
	draft := gpuportal.PoliciesToDecode() // rules it does not name keep their defaults
	if err := bindJSON(c, &draft); err != nil {
		return err
	}
	if err := s.db.CheckPolicies(c.Request().Context(), draft); err != nil {
		return err
	}
	run, err := s.startWhatIf(c, draft, elasticity)
	if err != nil {
		return err
	}
	select {
	case <-run.done:
	case <-c.Request().Context().Done():
		return c.Request().Context().Err()
	}
	if run.result.err != nil {
		return run.result.err
	}
	return c.JSON(http.StatusOK, run.result)
}

// parseElasticity reads the what-if's spot price elasticity ("" is the
// simulator's default).
func parseElasticity(v string) (float64, error) {
	if strings.TrimSpace(v) == "" {
		return simulate.DefaultSpotPriceElasticity, nil
	}
	e, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil || math.IsNaN(e) || e < 0 || e > simulate.MaxSpotPriceElasticity {
		return 0, gpuportal.FieldErrorf(gpuportal.EINVALID, "spot_price_elasticity", "The spot price elasticity is a number from 0 to %d.", simulate.MaxSpotPriceElasticity)
	}
	return e, nil
}

func (s *Server) startWhatIf(c echo.Context, draft gpuportal.Policies, elasticity float64) (*whatIfRun, error) {
	ctx := c.Request().Context()
	current, err := s.db.Policies(ctx)
	if err != nil {
		return nil, err
	}
	scenario, sample, err := s.fleetScenario(ctx)
	if err != nil {
		return nil, err
	}
	scenario.SpotPriceElasticity = &elasticity
	return s.whatIfs.start(scenario, sample, current, draft, s.cfg.Location, time.Now())
}

// whatIfView is the page's view of a run: progress, or the comparison.
func (s *Server) whatIfView(run *whatIfRun) templates.WhatIfView {
	v := templates.WhatIfView{ID: run.id, Progress: math.Round(run.fraction() * 100), Days: s.whatIfs.days}
	select {
	case <-run.done:
	default:
		return v
	}
	v.Done = true
	res := run.result
	if res.err != nil {
		s.log.Error("what-if simulation", "err", res.err)
		v.Failed = true
		return v
	}
	cur, dr := res.Current, res.Draft
	v.Sample, v.GPUs = res.Sample, cur.GPUs
	v.Elasticity = dr.SpotPriceElasticity
	v.TenPercentFewer = math.Round((1 - math.Pow(1.1, -dr.SpotPriceElasticity)) * 100)
	for _, m := range slices.Sorted(maps.Keys(dr.SpotDemandFactor)) {
		if f := dr.SpotDemandFactor[m]; f != 1 {
			v.SpotDemand = append(v.SpotDemand, templates.WhatIfDemand{Model: m, Factor: f})
		}
	}
	money := func(label string, a, b gpuportal.Fen, higherBetter bool) templates.WhatIfRow {
		return whatIfRow(label, a.String(), b.String(), float64(a), float64(b), fmt.Sprintf("%+.1f %%", change(float64(a), float64(b))), higherBetter)
	}
	pct := func(label string, a, b float64, higherBetter bool) templates.WhatIfRow {
		return whatIfRow(label, fmt.Sprintf("%.1f %%", a*100), fmt.Sprintf("%.1f %%", b*100), a, b, fmt.Sprintf("%+.1f pp", (b-a)*100), higherBetter)
	}
	v.Rows = []templates.WhatIfRow{
		money("Revenue", cur.RevenueTotal, dr.RevenueTotal, true),
		money("Revenue from reservations", cur.Revenue[store.ProductReserved], dr.Revenue[store.ProductReserved], true),
		money("Revenue from on-demand", cur.Revenue[store.ProductOnDemand], dr.Revenue[store.ProductOnDemand], true),
		money("Revenue from spot", cur.Revenue[store.ProductSpot], dr.Revenue[store.ProductSpot], true),
		pct("Utilization", cur.Utilization, dr.Utilization, true),
		whatIfRow("Spot interruptions per 100 spot GPU-hours", fmt.Sprintf("%.2f", cur.InterruptionsPer100SpotGPUHours), fmt.Sprintf("%.2f", dr.InterruptionsPer100SpotGPUHours),
			cur.InterruptionsPer100SpotGPUHours, dr.InterruptionsPer100SpotGPUHours, fmt.Sprintf("%+.2f", dr.InterruptionsPer100SpotGPUHours-cur.InterruptionsPer100SpotGPUHours), false),
		whatIfRow("Work lost to interruptions (GPU-hours)", fmt.Sprintf("%.1f", cur.LostGPUHours), fmt.Sprintf("%.1f", dr.LostGPUHours),
			cur.LostGPUHours, dr.LostGPUHours, fmt.Sprintf("%+.1f", dr.LostGPUHours-cur.LostGPUHours), false),
		pct("Reservations on time", cur.ReservationsOnTime, dr.ReservationsOnTime, true),
		pct("Spot demand served", cur.SpotDemandServed, dr.SpotDemandServed, true),
		money("Customers saved against list price", cur.CustomerSavings, dr.CustomerSavings, true),
	}
	return v
}

func whatIfRow(label, current, draft string, a, b float64, diff string, higherBetter bool) templates.WhatIfRow {
	row := templates.WhatIfRow{Label: label, Current: current, Draft: draft, Change: diff}
	if hi := max(math.Abs(a), math.Abs(b)); hi > 0 {
		row.CurrentBar, row.DraftBar = int(math.Round(math.Abs(a)/hi*100)), int(math.Round(math.Abs(b)/hi*100))
	}
	switch {
	case b == a:
	case (b > a) == higherBetter:
		row.Trend = "better"
	default:
		row.Trend = "worse"
	}
	return row
}

// change is b against a in percent (0 when a is 0).
func change(a, b float64) float64 {
	if a == 0 {
		return 0
	}
	return (b - a) / math.Abs(a) * 100
}
