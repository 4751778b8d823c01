package simulate

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"gpuportal"
	"gpuportal/store"
)

// fleet is the simulated nodes: each does at once what its desired state
// says (start, give notice, stop), runs each workload for the work its
// customer has left, and ends it at its notice's deadline (the workload
// checkpoints and exits on SIGTERM). It keeps the figures only nodes see:
// GPU-hours run by kind, interruptions, which GPUs are busy.
type fleet struct {
	db        *store.DB
	revisions map[string]int64                  // each node's revision when last read
	desired   map[string]gpuportal.AgentDesired // and its desired state then
	nodes     []string                          // sorted
	work      map[workKey]*workload
	// left is the work each instance (or job task) has still to do; an
	// interrupted instance resumes from its checkpoint.
	left map[string]time.Duration

	// Spot workloads that checkpoint report every checkpointEvery of
	// running (zero: none do); which do is fixed per instance.
	checkpointEvery time.Duration
	checkpointShare float64

	gpuSeconds    map[gpuportal.Lifecycle]int64 // by lifecycle: spot, on-demand (scheduled: within reservations)
	plainSpotDone int64                         // GPU-seconds of spot work outside jobs
	interruptions int                           // notices for reservations, on-demand demand or node failures
}

type workKey struct {
	instance int64
	attempt  int
}

type workload struct {
	node      string
	lifecycle gpuportal.Lifecycle
	gpus      []string
	job       bool
	leftKey   string
	started   time.Time
	finishAt  time.Time // when its work is done
	deadline  time.Time // its notice's deadline; zero without one
	notified  bool
	// checkpoints: it reports a checkpoint every checkpointEvery; the
	// last one reported so far.
	checkpoints bool
	reported    time.Time
	instance    int64
	attempt     int
}

func newFleet(db *store.DB) *fleet {
	return &fleet{db: db, revisions: map[string]int64{}, desired: map[string]gpuportal.AgentDesired{}, work: map[workKey]*workload{}, left: map[string]time.Duration{}, gpuSeconds: map[gpuportal.Lifecycle]int64{}}
}

// workKeyOf names the work of a desired workload: a job's task keeps its
// work across attempts (new instances), a plain instance across restarts.
func workKeyOf(w gpuportal.DesiredWorkload) string {
	if w.Task != nil {
		return fmt.Sprintf("job-%d-task-%d", w.Task.JobID, w.Task.Index)
	}
	return fmt.Sprintf("instance-%d", w.InstanceID)
}

// reconcile brings every node whose desired state changed, or whose
// workloads finish or reach their deadline by now, in line, and reports
// to the store. It returns the GPUs of the workloads that ended (freed:
// the portal would kick its scheduler).
func (f *fleet) reconcile(ctx context.Context, now time.Time) (freed []string, err error) {
	revs, err := f.db.NodeRevisions(ctx)
	if err != nil {
		return nil, err
	}
	if len(f.nodes) != len(revs) {
		f.nodes = f.nodes[:0]
		for id := range revs {
			f.nodes = append(f.nodes, id)
		}
		slices.Sort(f.nodes)
	}
	var batch []store.NodeReports
	due := map[string]bool{}
	for _, w := range f.work {
		if !w.finishAt.After(now) || (!w.deadline.IsZero() && !w.deadline.After(now)) {
			due[w.node] = true
		}
	}
	for _, node := range f.nodes {
		if revs[node] == f.revisions[node] && !due[node] {
			continue
		}
		// A node whose revision is the one it last read has the desired
		// state it read then, as an agent keeps it between heartbeats:
		// only a workload of its own is due.
		desired, ok := f.desired[node]
		if !ok || revs[node] != f.revisions[node] {
			if desired, err = f.db.DesiredFor(ctx, node); err != nil {
				return nil, err
			}
			f.desired[node] = desired
		}
		f.revisions[node] = revs[node]
		reports, ended := f.obey(node, desired, now)
		if len(reports) == 0 {
			continue
		}
		batch = append(batch, store.NodeReports{Node: node, Reports: reports})
		freed = append(freed, ended...)
	}
	// One transaction for every node's reports: a node's reports change
	// no other node's desired state (what they free is placed by a tick).
	if err := f.db.ApplyReportsOfNodes(ctx, batch); err != nil {
		return nil, err
	}
	return freed, nil
}

// obey is one node's agent: start what is new, note notices, end what is
// no longer wanted, done, or past its deadline. It returns its reports and
// the GPUs of the workloads that ended.
func (f *fleet) obey(node string, d gpuportal.AgentDesired, now time.Time) (reports []gpuportal.WorkloadStatus, freed []string) {
	wanted := map[workKey]bool{}
	for _, dw := range d.Workloads {
		key := workKey{dw.InstanceID, dw.Attempt}
		w := f.work[key]
		if dw.Stop {
			if w == nil { // stopped before it started: nothing ran
				reports = append(reports, gpuportal.WorkloadStatus{InstanceID: dw.InstanceID, Attempt: dw.Attempt, State: gpuportal.WorkloadExited, GPUsFree: true})
				freed = append(freed, dw.GPUs...)
			}
			continue // ended below, as no longer wanted
		}
		wanted[key] = true
		if w == nil {
			w = &workload{node: node, lifecycle: dw.Lifecycle, gpus: dw.GPUs, job: dw.Task != nil, leftKey: workKeyOf(dw), started: now,
				instance: dw.InstanceID, attempt: dw.Attempt}
			w.checkpoints = f.checkpointEvery > 0 && dw.Lifecycle == gpuportal.LifecycleSpot && checkpointsByChance(dw.InstanceID, f.checkpointShare)
			left, ok := f.left[w.leftKey]
			if !ok {
				left = time.Hour // work the simulator did not generate (none today): an hour
			}
			w.finishAt = now.Add(left)
			f.work[key] = w
			reports = append(reports, gpuportal.WorkloadStatus{InstanceID: dw.InstanceID, Attempt: dw.Attempt, State: gpuportal.WorkloadRunning})
		}
		if dw.Interrupt != nil && !w.notified {
			w.notified = true
			w.deadline = now.Add(time.Duration(dw.Interrupt.DeadlineInSeconds * float64(time.Second)))
			switch dw.Interrupt.Reason {
			case gpuportal.ReasonReservation, gpuportal.ReasonOnDemand, gpuportal.ReasonNodeFailure:
				f.interruptions++
			}
		}
	}
	keys := make([]workKey, 0, len(f.work))
	for key, w := range f.work {
		if w.node == node {
			keys = append(keys, key)
		}
	}
	slices.SortFunc(keys, func(a, b workKey) int {
		if a.instance != b.instance {
			return int(a.instance - b.instance)
		}
		return a.attempt - b.attempt
	})
	for _, key := range keys {
		w := f.work[key]
		var exit gpuportal.WorkloadStatus
		switch {
		case !wanted[key]: // stopped by its owner, the platform, or its reservation's end
			exit = f.end(key, w, now, 143, "SIGTERM")
		case !w.finishAt.After(now) && (w.deadline.IsZero() || !w.finishAt.After(w.deadline)):
			exit = f.end(key, w, w.finishAt, 0, "")
		case !w.deadline.IsZero() && !w.deadline.After(now):
			exit = f.end(key, w, w.deadline, 143, "SIGTERM")
		default:
			continue
		}
		reports = append(reports, exit)
		freed = append(freed, w.gpus...)
	}
	return reports, freed
}

// checkpointsByChance says, the same way every run, whether an instance's
// workload is one of the share that report checkpoints.
func checkpointsByChance(instanceID int64, share float64) bool {
	h := uint64(instanceID) * 0x9E3779B97F4A7C15 // Fibonacci hashing: spreads consecutive ids
	return float64(h>>11)/float64(1<<53) < share
}

// checkpoint reports, before the scheduler looks, the checkpoints spot
// workloads made since their last report, each stamped at the time it was
// made (the business clock is set back to it for the report, then
// restored): the planner weighs victims by them and an interruption's
// lost work is measured from them. It reports whether it reported any.
func (f *fleet) checkpoint(ctx context.Context, clock *gpuportal.ManualClock, now time.Time) (bool, error) {
	if f.checkpointEvery <= 0 {
		return false, nil
	}
	type batch struct {
		node string
		at   time.Time
	}
	due := map[batch][]gpuportal.WorkloadStatus{}
	var order []batch
	for _, w := range f.work {
		if !w.checkpoints || !w.deadline.IsZero() {
			continue
		}
		last := w.started.Add(now.Sub(w.started) / f.checkpointEvery * f.checkpointEvery)
		if !last.After(w.started) || !last.After(w.reported) {
			continue
		}
		w.reported = last
		b := batch{w.node, last}
		if _, ok := due[b]; !ok {
			order = append(order, b)
		}
		at := last
		due[b] = append(due[b], gpuportal.WorkloadStatus{InstanceID: w.instance, Attempt: w.attempt, State: gpuportal.WorkloadRunning, CheckpointAt: &at})
	}
	slices.SortFunc(order, func(a, b batch) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return strings.Compare(a.node, b.node)
	})
	defer clock.Set(now)
	for _, b := range order {
		clock.Set(b.at)
		if err := f.db.ApplyWorkloadReports(ctx, b.node, due[b]); err != nil {
			return false, err
		}
	}
	return len(order) > 0, nil
}

// end finishes a workload at the time it ended: its GPU-time is counted
// and what is left of its work kept for a next attempt.
func (f *fleet) end(key workKey, w *workload, at time.Time, code int, signal string) gpuportal.WorkloadStatus {
	delete(f.work, key)
	ran := at.Sub(w.started)
	if ran < 0 {
		ran = 0
	}
	f.left[w.leftKey] = max(0, w.finishAt.Sub(w.started)-ran)
	seconds := int64(ran/time.Second) * int64(len(w.gpus))
	f.gpuSeconds[w.lifecycle] += seconds
	if w.lifecycle == gpuportal.LifecycleSpot && !w.job {
		f.plainSpotDone += seconds
	}
	exitCode := code
	return gpuportal.WorkloadStatus{InstanceID: key.instance, Attempt: key.attempt, State: gpuportal.WorkloadExited, ExitCode: &exitCode, Signal: signal, GPUsFree: true}
}

// next is the earliest time after now at which a workload finishes or
// reaches its deadline; zero when none.
func (f *fleet) next(now time.Time) time.Time {
	var out time.Time
	for _, w := range f.work {
		for _, t := range []time.Time{w.finishAt, w.deadline} {
			if !t.IsZero() && t.After(now) && (out.IsZero() || t.Before(out)) {
				out = t
			}
		}
	}
	return out
}

// busy reports whether another workload than a reservation's own runs on
// any of gpus.
func (f *fleet) busy(gpus []string) bool {
	for _, w := range f.work {
		if w.lifecycle == gpuportal.LifecycleScheduled {
			continue
		}
		for _, g := range w.gpus {
			if slices.Contains(gpus, g) {
				return true
			}
		}
	}
	return false
}

// finish counts the GPU-time of what still runs at the end.
func (f *fleet) finish(at time.Time) {
	for _, w := range f.work {
		seconds := int64(at.Sub(w.started)/time.Second) * int64(len(w.gpus))
		f.gpuSeconds[w.lifecycle] += seconds
		if w.lifecycle == gpuportal.LifecycleSpot && !w.job {
			f.plainSpotDone += seconds
		}
	}
}
