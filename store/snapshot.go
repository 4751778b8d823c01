package store

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"

	"gpuportal"
	"gpuportal/plan"
)

// loadSnapshot reads what the planner decides over (plan.Snapshot):
// every pool's counts, the reservations, instances, accounts, jobs and
// waitlist entries something may be due for, and the GPUs of the pools
// the planner will look into (plan.DetailNeeded). With nothing due it
// reads a handful of small aggregates.
func (db *DB) loadSnapshot(ctx context.Context, tx *sql.Tx, now time.Time) (plan.Snapshot, error) {
	q := tx
	s := plan.Snapshot{Pools: map[plan.PoolKey]*plan.Pool{}, Owners: map[int64]plan.Owner{},
		JobGPUs: map[plan.UserPool]int{}, FreeHours: map[plan.PoolKey]map[int64]int{}, Location: db.Location, VictimRule: db.VictimRule}
	steps := []struct {
		name string
		load func(context.Context, queryer, time.Time, *plan.Snapshot) error
	}{
		{"pools", db.loadPoolCounts},
		{"reservations", db.loadDueReservations},
		{"pending instances", db.loadPending},
		{"lost instances", db.loadLost},
		{"accounts", db.loadAccounts},
		{"jobs", db.loadJobs},
		{"waitlist", db.loadWaitlist},
		{"idle stop", db.loadIdle},
		{"budgets", db.loadBudgets},
	}
	for _, step := range steps {
		if err := step.load(ctx, q, now, &s); err != nil {
			return s, fmt.Errorf("load %s: %w", step.name, err)
		}
	}
	var assigned assignments
	for key, detail := range plan.DetailNeeded(s, now) {
		if err := db.loadPoolDetail(ctx, q, s.Pools[key], detail, &assigned); err != nil {
			return s, fmt.Errorf("load pool %s/%s: %w", key.Model, key.Region, err)
		}
	}
	return s, nil
}

// poolOf returns the snapshot's pool for key, reading its model, policy
// and booked hours the first time.
func (db *DB) poolOf(ctx context.Context, q queryer, s *plan.Snapshot, key plan.PoolKey, now time.Time) (*plan.Pool, error) {
	if pl := s.Pools[key]; pl != nil {
		return pl, nil
	}
	pl, err := db.loadPool(ctx, q, key, now)
	if err != nil {
		return nil, err
	}
	s.Pools[key] = pl
	return pl, nil
}

// loadPool reads one pool's counts (plan.Pool without its detail).
func (db *DB) loadPool(ctx context.Context, q queryer, key plan.PoolKey, now time.Time) (*plan.Pool, error) {
	m, policy, err := db.catalogEntry(ctx, q, key.Model, key.Region)
	if err != nil {
		return nil, err
	}
	pl := &plan.Pool{Key: key, Model: *m, Policy: policy}
	if pl.Healthy, err = db.healthyGPUs(ctx, q, key.Model, key.Region); err != nil {
		return nil, err
	}
	type hour struct {
		at       int64
		reserved int
	}
	booked, err := scanAll(ctx, q, func(r *sql.Rows, h *hour) error { return r.Scan(&h.at, &h.reserved) },
		`SELECT hour, reserved FROM hourly_usage WHERE model_id = ? AND region_id = ? AND hour >= ? AND hour <= ? AND reserved > 0`,
		key.Model, key.Region, unix(now.Truncate(time.Hour)), unix(now.Add(plan.BookedAhead)))
	if err != nil {
		return nil, err
	}
	pl.Booked = make(map[int64]int, len(booked))
	for _, h := range booked {
		pl.Booked[h.at] = h.reserved
	}
	if pl.ReservedAhead, err = mostReservedFrom(ctx, db, q, key.Model, key.Region, now); err != nil {
		return nil, err
	}
	return pl, nil
}

// loadPoolCounts reads every pool with GPUs or instances, and what its
// instances hold and wait for (one aggregate over the live instances).
func (db *DB) loadPoolCounts(ctx context.Context, q queryer, now time.Time, s *plan.Snapshot) error {
	keys, err := scanAll(ctx, q, func(r *sql.Rows, k *plan.PoolKey) error {
		return r.Scan(&k.Model, &k.Region)
	}, `SELECT model_id, region_id FROM capacity`)
	if err != nil {
		return err
	}
	for _, k := range keys {
		if _, err := db.poolOf(ctx, q, s, k, now); err != nil {
			return err
		}
	}
	counts, err := instanceCounts(ctx, q, "")
	if err != nil {
		return err
	}
	for _, c := range counts {
		pl, err := db.poolOf(ctx, q, s, c.key, now)
		if err != nil {
			return err
		}
		c.addTo(pl)
	}
	leaving, err := leavingInstances(ctx, q, "")
	if err != nil {
		return err
	}
	for _, l := range leaving {
		pl, err := db.poolOf(ctx, q, s, l.key, now)
		if err != nil {
			return err
		}
		pl.Leaving = append(pl.Leaving, l.Leaving)
	}
	notices, err := db.longestNotices(ctx, q, "")
	if err != nil {
		return err
	}
	for _, n := range notices {
		pl, err := db.poolOf(ctx, q, s, n.key, now)
		if err != nil {
			return err
		}
		pl.LongestNotice = n.seconds
	}
	return nil
}

type longestNotice struct {
	key     plan.PoolKey
	seconds int
}

// longestNotices is, per pool, the longest notice a live spot launch asked
// for (pools where none asked are absent). A partial index of the few
// that asked keeps it off the tick's count scans.
func (db *DB) longestNotices(ctx context.Context, q queryer, where string, args ...any) ([]longestNotice, error) {
	return scanAll(ctx, q, func(r *sql.Rows, n *longestNotice) error { return r.Scan(&n.key.Model, &n.key.Region, &n.seconds) },
		`SELECT model_id, region_id, max(notice_seconds) FROM `+db.indexed("instances", "instances_asked_notice")+` WHERE notice_seconds IS NOT NULL AND status IN ('pending', 'running') `+where+`
		GROUP BY model_id, region_id`, args...)
}

type leavingInstance struct {
	key plan.PoolKey
	plan.Leaving
}

// leavingInstances lists the placed instances with notice and when their
// GPUs free (deadline + grace).
func leavingInstances(ctx context.Context, q queryer, where string, args ...any) ([]leavingInstance, error) {
	return scanAll(ctx, q, func(r *sql.Rows, l *leavingInstance) error {
		var free int64
		err := r.Scan(&l.key.Model, &l.key.Region, &l.Count, &free)
		l.FreeAt = fromUnix(free)
		return err
	}, `SELECT model_id, region_id, count, coalesce(deadline_at, 0) + coalesce(grace_seconds, 0) FROM instances
		WHERE status = 'interrupting' AND node_id IS NOT NULL `+where+` ORDER BY id`, args...)
}

// livePool reads one pool, and its detail when detail says the counts call
// for it (a spot launch's check).
func (db *DB) livePool(ctx context.Context, tx *sql.Tx, key plan.PoolKey, now time.Time, detail func(*plan.Pool) bool) (*plan.Pool, error) {
	q := tx
	pl, err := db.loadPool(ctx, q, key, now)
	if err != nil {
		return nil, err
	}
	counts, err := instanceCounts(ctx, q, "AND model_id = ? AND region_id = ?", key.Model, key.Region)
	if err != nil {
		return nil, err
	}
	for _, c := range counts {
		c.addTo(pl)
	}
	leaving, err := leavingInstances(ctx, q, "AND model_id = ? AND region_id = ?", key.Model, key.Region)
	if err != nil {
		return nil, err
	}
	for _, l := range leaving {
		pl.Leaving = append(pl.Leaving, l.Leaving)
	}
	notices, err := db.longestNotices(ctx, q, "AND model_id = ? AND region_id = ?", key.Model, key.Region)
	if err != nil {
		return nil, err
	}
	for _, n := range notices {
		pl.LongestNotice = n.seconds
	}
	if !detail(pl) {
		return pl, nil
	}
	return pl, db.loadPoolDetail(ctx, q, pl, plan.DetailFree, &assignments{})
}

// instanceCount is the GPUs of live instances of one kind and status in
// a pool: placed, waiting, and waiting outside any job.
type instanceCount struct {
	key                                          plan.PoolKey
	kind                                         gpuportal.InstanceKind
	status                                       gpuportal.InstanceStatus
	placed, placedTasks, waiting, waitingPlainly int
}

func instanceCounts(ctx context.Context, q queryer, where string, args ...any) ([]instanceCount, error) {
	return scanAll(ctx, q, func(r *sql.Rows, c *instanceCount) error {
		return r.Scan(&c.status, &c.kind, &c.key.Model, &c.key.Region, &c.placed, &c.placedTasks, &c.waiting, &c.waitingPlainly)
	}, `SELECT status, kind, model_id, region_id, sum(CASE WHEN node_id IS NOT NULL THEN count ELSE 0 END),
		sum(CASE WHEN node_id IS NOT NULL AND job_id IS NOT NULL THEN count ELSE 0 END),
		sum(CASE WHEN node_id IS NULL THEN count ELSE 0 END), sum(CASE WHEN node_id IS NULL AND job_id IS NULL THEN count ELSE 0 END)
		FROM instances WHERE status IN ('pending', 'running', 'interrupting') `+where+` GROUP BY status, kind, model_id, region_id`, args...)
}

// addTo counts c into its pool: what placed instances hold, and what
// on-demand and spot instances without notice hold or wait for.
func (c instanceCount) addTo(pl *plan.Pool) {
	pl.Held += c.placed
	if c.status == gpuportal.InstanceInterrupting {
		return
	}
	switch c.kind {
	case gpuportal.KindOnDemand:
		pl.OnDemand += c.placed
		pl.OnDemandWait += c.waiting
	case gpuportal.KindSpot:
		pl.Spot += c.placed
		pl.JobTaskSpot += c.placedTasks
		pl.SpotWait += c.waitingPlainly
	}
}

// loadPoolDetail reads a pool's GPUs: all of them, who holds them, which
// active reservation each is assigned to, and its spot instances without
// notice (DetailFull); or only the GPUs nobody holds (DetailFree). The
// GPUs themselves come from the list kept between ticks (poolGPUs); who
// holds them from the small table of live assignments.
func (db *DB) loadPoolDetail(ctx context.Context, q queryer, pl *plan.Pool, detail plan.Detail, assigned *assignments) error {
	all, err := db.poolGPUs(ctx, q, pl.Key)
	if err != nil {
		return err
	}
	type owner struct {
		gpu     string
		id      int64
		leaving bool
	}
	var nodes []string
	for _, g := range all {
		if n := len(nodes); n == 0 || nodes[n-1] != g.Node {
			nodes = append(nodes, g.Node)
		}
	}
	gpus := all
	var holders []owner
	if detail == plan.DetailFull {
		// Driven from the small tables of live assignments (CROSS JOIN
		// keeps SQLite from starting at the ever-growing instances).
		if holders, err = scanAll(ctx, q, func(r *sql.Rows, o *owner) error { return r.Scan(&o.gpu, &o.id, &o.leaving) },
			`SELECT ig.gpu_uuid, ig.instance_id, i.status = 'interrupting' OR i.stop_requested_at IS NOT NULL FROM instance_gpus ig CROSS JOIN gpus g
			JOIN instances i ON i.id = ig.instance_id WHERE g.uuid = ig.gpu_uuid AND g.model_id = ?`, pl.Key.Model); err != nil {
			return err
		}
	} else {
		isHeld, err := assigned.instances(ctx, q)
		if err != nil {
			return err
		}
		gpus = slices.DeleteFunc(all, func(g plan.GPU) bool { return isHeld[g.UUID] })
	}
	reserved, err := assigned.reservations(ctx, db, q)
	if err != nil {
		return err
	}
	index := make(map[string]int, len(gpus))
	for k, g := range gpus {
		index[g.UUID] = k
	}
	for _, o := range holders {
		if k, ok := index[o.gpu]; ok {
			gpus[k].Holder, gpus[k].Leaving = o.id, o.leaving
		}
	}
	for k := range gpus {
		gpus[k].Reservation = reserved[gpus[k].UUID]
	}
	var spots []plan.Spot
	if detail == plan.DetailFull {
		if spots, err = scanAll(ctx, q, func(r *sql.Rows, s *plan.Spot) error {
			var started, checkpoint int64
			err := r.Scan(&s.ID, &s.UserID, &s.Count, &s.Node, &started, &s.JobTask, &checkpoint, &s.Rebalanced, &s.NoticeSeconds)
			s.StartedAt = fromUnix(started)
			if checkpoint > 0 {
				s.LastCheckpoint = fromUnix(checkpoint)
			}
			return err
		}, `SELECT id, user_id, count, node_id, coalesce(started_at, created_at), job_id IS NOT NULL, coalesce(last_checkpoint_at, 0), rebalance_at IS NOT NULL, coalesce(notice_seconds, 0) FROM instances
			WHERE model_id = ? AND region_id = ? AND kind = 'spot' AND status IN ('pending', 'running') AND node_id IS NOT NULL AND count > 0`, pl.Key.Model, pl.Key.Region); err != nil {
			return err
		}
	}
	pl.GPUs, pl.Spots, pl.Detail, pl.Nodes = gpus, spots, detail, nodes
	return nil
}

// assignments are the GPUs live instances and active reservations hold,
// each read once for all the pools of a snapshot that need it. The
// reservations' GPUs change seldom (an activation, an end, a replacement),
// so they are kept between ticks (DB.reservedGPUs): that map is shared,
// read only.
type assignments struct {
	held     map[string]bool  // GPU → some live instance holds it
	reserved map[string]int64 // GPU → the active reservation it is assigned to
}

func (a *assignments) instances(ctx context.Context, q queryer) (map[string]bool, error) {
	if a.held != nil {
		return a.held, nil
	}
	// Every held GPU, of any pool: the assignments' own index is all it
	// reads, cheaper than telling one pool's apart.
	list, err := scanAll(ctx, q, func(r *sql.Rows, uuid *string) error { return r.Scan(uuid) }, `SELECT gpu_uuid FROM instance_gpus`)
	if err != nil {
		return nil, err
	}
	a.held = make(map[string]bool, len(list))
	for _, uuid := range list {
		a.held[uuid] = true
	}
	return a.held, nil
}

func (a *assignments) reservations(ctx context.Context, db *DB, q queryer) (map[string]int64, error) {
	if a.reserved != nil {
		return a.reserved, nil
	}
	var err error
	a.reserved, err = db.reservedGPUs.read(ctx, q, "reservation_gpus_revision", struct{}{}, func() (map[string]int64, error) {
		type assigned struct {
			gpu string
			id  int64
		}
		// Every pool's at once, without the GPUs' table: the caller looks
		// up its own pool's GPUs.
		list, err := scanAll(ctx, q, func(r *sql.Rows, o *assigned) error { return r.Scan(&o.gpu, &o.id) },
			`SELECT rg.gpu_uuid, rg.reservation_id FROM reservation_gpus rg JOIN reservations r ON r.id = rg.reservation_id AND r.status = 'active'`)
		if err != nil {
			return nil, err
		}
		reserved := make(map[string]int64, len(list))
		for _, o := range list {
			reserved[o.gpu] = o.id
		}
		return reserved, nil
	})
	return a.reserved, err
}

// loadDueReservations reads the reservations the planner may act on:
// ending, starting, short of GPUs failed nodes held, or near a reminder.
func (db *DB) loadDueReservations(ctx context.Context, q queryer, now time.Time, s *plan.Snapshot) error {
	lost := map[int64]int{}
	type lostRow struct {
		id int64
		n  int
	}
	// Only while some GPU is out (its node offline or in a maintenance
	// window, or itself unhealthy) can a reservation be short: most ticks
	// none is, and the join over every assigned GPU is not read.
	var out bool
	// (gpuOut, asked of each table on its own: no join.)
	if err := q.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM nodes n WHERE `+nodeOut+`)
		OR EXISTS (SELECT 1 FROM gpus g WHERE g.healthy = 0)`).Scan(&out); err != nil {
		return err
	}
	var rows []lostRow
	if out {
		var err error
		if rows, err = scanAll(ctx, q, func(r *sql.Rows, l *lostRow) error { return r.Scan(&l.id, &l.n) }, `SELECT rg.reservation_id, count(*) FROM reservation_gpus rg JOIN gpus g ON g.uuid = rg.gpu_uuid JOIN nodes n ON n.id = g.node_id
			JOIN reservations r ON r.id = rg.reservation_id AND r.status = 'active'
			WHERE `+gpuOut+` GROUP BY rg.reservation_id`); err != nil {
			return err
		}
	}
	var lostIDs []any
	for _, l := range rows {
		lost[l.id] = l.n
		lostIDs = append(lostIDs, l.id)
	}
	// The candidates first, each by an index range (a confirmed one
	// starting within the start reminder's lead, an active one whose start
	// is still ahead, any ending within the end reminder's lead): the
	// conditions after them, each within one of those, would otherwise be
	// asked of every live reservation.
	startLead, endLead := unix(now.Add(plan.StartReminderLead)), unix(now.Add(plan.EndReminderLead))
	query := `SELECT id, user_id, model_id, region_id, count, start_at, end_at, status, reminded_start, reminded_end FROM reservations
		WHERE (id IN (SELECT id FROM reservations WHERE status = 'confirmed' AND start_at <= ?
			UNION ALL SELECT id FROM reservations WHERE status = 'active' AND start_at > ? AND start_at <= ?
			UNION ALL SELECT id FROM reservations WHERE status IN ('confirmed', 'active') AND end_at <= ?)
		AND (end_at <= ? OR (status = 'confirmed' AND start_at <= ?)
		OR (reminded_start = 0 AND start_at > ? AND start_at <= ?) OR (reminded_end = 0 AND end_at > ? AND end_at <= ?)))`
	args := []any{startLead, unix(now), startLead, endLead,
		unix(now), unix(now), unix(now), startLead, unix(now), endLead}
	if len(lostIDs) > 0 {
		query += ` OR (status IN ('confirmed', 'active') AND id IN (?` + repeatArg(len(lostIDs)-1) + `))`
		args = append(args, lostIDs...)
	}
	query += ` ORDER BY start_at, id`
	list, err := scanAll(ctx, q, func(r *sql.Rows, res *plan.Reservation) error {
		var start, end int64
		err := r.Scan(&res.ID, &res.UserID, &res.Pool.Model, &res.Pool.Region, &res.Count, &start, &end, &res.Status, &res.RemindedStart, &res.RemindedEnd)
		res.Start, res.End = fromUnix(start), fromUnix(end)
		res.Lost = lost[res.ID]
		return err
	}, query, args...)
	if err != nil {
		return err
	}
	for _, r := range list {
		if _, err := db.poolOf(ctx, q, s, r.Pool, now); err != nil {
			return err
		}
	}
	s.Reservations = list
	return nil
}

// repeatArg is ", ?" n times.
func repeatArg(n int) string {
	out := make([]byte, 0, 3*n)
	for range n {
		out = append(out, ", ?"...)
	}
	return string(out)
}

// loadPending reads the instances waiting for a place: reserved ones
// first, then on-demand, then spot, oldest first. A disabled account's
// never place (its account was closed down; nothing of it runs).
func (db *DB) loadPending(ctx context.Context, q queryer, now time.Time, s *plan.Snapshot) error {
	list, err := scanAll(ctx, q, func(r *sql.Rows, i *plan.PendingInstance) error {
		return r.Scan(&i.ID, &i.UserID, &i.Kind, &i.Pool.Model, &i.Pool.Region, &i.Count, &i.ReservationID, &i.LastNode, &i.Restarts)
	}, `SELECT id, user_id, kind, model_id, region_id, count, coalesce(reservation_id, 0), coalesce(last_node_id, ''), restarts
		FROM instances WHERE status = 'pending' AND node_id IS NULL AND stop_requested_at IS NULL
		AND (unconfirmed_node IS NULL OR unconfirmed_since <= ?)
		AND NOT EXISTS (SELECT 1 FROM users u WHERE u.id = instances.user_id AND u.disabled_at IS NOT NULL)
		ORDER BY CASE kind WHEN 'reserved' THEN 0 WHEN 'on_demand' THEN 1 ELSE 2 END, id`, db.Wall.Now().Add(-gpuportal.FenceTimeout).Unix())
	if err != nil {
		return err
	}
	for _, i := range list {
		if _, err := db.poolOf(ctx, q, s, i.Pool, now); err != nil {
			return err
		}
	}
	s.Pending = list
	return nil
}

// loadLost reads the live instances of offline nodes.
func (db *DB) loadLost(ctx context.Context, q queryer, _ time.Time, s *plan.Snapshot) error {
	var err error
	s.Lost, err = scanAll(ctx, q, func(r *sql.Rows, i *plan.LostInstance) error { return r.Scan(&i.ID, &i.Kind, &i.Interrupting) }, `SELECT id, kind, status = 'interrupting' FROM instances WHERE status IN ('pending', 'running', 'interrupting')
		AND node_id IN (SELECT id FROM nodes WHERE online = 0) ORDER BY id`)
	return err
}

// loadAccounts reads the accounts the balance rule may act on: users with
// spot or on-demand instances not yet told to stop.
//
// One aggregate over the live instances gives each such user's money, how
// many of their instances could be stopped, what their runs cost an hour,
// when the earliest started, and whether a balance stop is under way
// (kept per account between ticks and summed again only for the accounts
// that changed: accountsums.go).
// From those alone an account is known to be clear (the rule has nothing
// to do) when even charged at the most its runs can have cost it lasts
// well beyond the warning: most accounts, most of the time. Only for the
// others is each run's exact cost read. (Reading every run's cost for
// every account was a fifth of a simulated fleet's ticks.)
func (db *DB) loadAccounts(ctx context.Context, q queryer, now time.Time, s *plan.Snapshot) error {
	sums, err := db.accountSums.read(ctx, db, q)
	if err != nil {
		return err
	}
	var unclear []accountSum
	for _, a := range sums {
		lowest := gpuportal.NewBalance(a.balance, accruedAtMost(a.burn, a.earliest, now), a.credit, a.burn, now)
		if !plan.AccountIsClear(lowest, a.noted, a.stopping, now) {
			unclear = append(unclear, a)
		}
	}
	if len(unclear) == 0 {
		return nil
	}
	args := make([]any, len(unclear))
	for k, a := range unclear {
		args[k] = a.userID
	}
	runs, err := runningCosts(ctx, q, `AND user_id IN (?`+repeatArg(len(args)-1)+`)`, args...)
	if err != nil {
		return err
	}
	held := map[int64]gpuportal.Fen{}
	for _, r := range runs {
		h, _ := r.accrued(now)
		held[r.userID] += h
	}
	s.Accounts = make([]plan.Account, 0, len(unclear))
	for _, a := range unclear {
		s.Accounts = append(s.Accounts, plan.Account{UserID: a.userID,
			Balance:  gpuportal.NewBalance(a.balance, held[a.userID], a.credit, a.burn, now),
			LowNoted: a.noted, Stoppable: a.stoppable, Stopping: a.stopping})
	}
	return nil
}

// loadJobs reads the jobs with queued tasks and, for those whose pool has
// a GPU idle at all, their live attempts, next queued tasks and what their
// owners may still start.
func (db *DB) loadJobs(ctx context.Context, q queryer, now time.Time, s *plan.Snapshot) error {
	// Only pools with a GPU nobody holds can start a task: a full fleet
	// (the common case) reads no job at all, however many are queued.
	var where []string
	var args []any
	for key, pl := range s.Pools {
		if pl.Healthy > pl.Held {
			where = append(where, `(model_id = ? AND region_id = ?)`)
			args = append(args, key.Model, key.Region)
		}
	}
	if len(where) == 0 {
		return nil
	}
	jobs, err := scanAll(ctx, q, func(r *sql.Rows, j *plan.JobQueue) error {
		return r.Scan(&j.ID, &j.UserID, &j.Pool.Model, &j.Pool.Region, &j.Kind, &j.GPUsPerTask, &j.MaxParallel, &j.OnDemandWorkers, &j.UnpaidNoted)
	}, `SELECT id, user_id, model_id, region_id, kind, gpus_per_task, max_parallel, on_demand_workers, unpaid_noted_at IS NOT NULL
		FROM jobs WHERE status IN ('queued', 'running') AND (`+strings.Join(where, " OR ")+`)
		AND EXISTS (SELECT 1 FROM job_tasks t WHERE t.status = 'queued' AND t.job_id = jobs.id) ORDER BY id`, args...)
	if err != nil {
		return err
	}
	var startable []plan.JobQueue
	for _, j := range jobs {
		pl, err := db.poolOf(ctx, q, s, j.Pool, now)
		if err != nil {
			return err
		}
		if plan.JobMayStart(pl, j, now) {
			startable = append(startable, j)
		}
	}
	if len(startable) == 0 {
		return nil
	}
	type live struct {
		job, user int64
		kind      gpuportal.InstanceKind
		pool      plan.PoolKey
		n, gpus   int
	}
	lives, err := scanAll(ctx, q, func(r *sql.Rows, l *live) error {
		return r.Scan(&l.job, &l.user, &l.kind, &l.pool.Model, &l.pool.Region, &l.n, &l.gpus)
	}, `SELECT job_id, user_id, kind, model_id, region_id, count(*), sum(count) FROM `+db.indexed("instances", "instances_live_jobs")+`
		WHERE job_id IS NOT NULL AND status IN ('pending', 'running', 'interrupting') GROUP BY job_id, user_id, kind, model_id, region_id`)
	if err != nil {
		return err
	}
	for _, l := range lives {
		s.JobGPUs[plan.UserPool{User: l.user, Pool: l.pool}] += l.gpus
		for k := range startable {
			if startable[k].ID != l.job {
				continue
			}
			if l.kind == gpuportal.KindOnDemand {
				startable[k].LiveOnDemand += l.n
			} else {
				startable[k].LiveSpot += l.n
			}
		}
	}
	for k := range startable {
		j := &startable[k]
		room := j.MaxParallel - j.LiveSpot - j.LiveOnDemand
		if room <= 0 {
			continue
		}
		if j.Queued, err = scanAll(ctx, q, func(r *sql.Rows, q *plan.QueuedTask) error { return r.Scan(&q.Index, &q.LastNode) }, `SELECT t.task_index, coalesce(i.node_id, '') FROM job_tasks t LEFT JOIN instances i ON i.id = t.instance_id
			WHERE t.job_id = ? AND t.status = 'queued' ORDER BY t.task_index LIMIT ?`, j.ID, room); err != nil {
			return err
		}
		if _, seen := s.Owners[j.UserID]; seen {
			continue
		}
		// What the owner can start tasks with: an hour of each beside an
		// hour of what already runs and waits (gpuportal.LaunchFunds).
		money, _, err := db.launchRoom(ctx, q, j.UserID, now)
		if err != nil {
			return err
		}
		quotas, err := db.quotasOf(ctx, q, j.UserID)
		if err != nil {
			return err
		}
		running, err := db.runningGPUsOf(ctx, q, j.UserID)
		if err != nil {
			return err
		}
		s.Owners[j.UserID] = plan.Owner{Available: money, GPURoom: quotas.MaxRunningGPUs - running}
	}
	s.Jobs = startable
	return nil
}

// loadWaitlist reads the entries waiting or holding an offer that has
// lapsed, and the free reservable GPUs of every hour they ask for.
func (db *DB) loadWaitlist(ctx context.Context, q queryer, now time.Time, s *plan.Snapshot) error {
	entries, err := scanAll(ctx, q, func(r *sql.Rows, w *plan.WaitEntry) error {
		var start, end, expires int64
		err := r.Scan(&w.ID, &w.UserID, &w.Pool.Model, &w.Pool.Region, &w.Count, &start, &end, &w.Status, &expires, &w.AutoBook, &w.DurationHours)
		w.Start, w.End, w.OfferExpires = fromUnix(start), fromUnix(end), fromUnix(expires)
		return err
	}, `SELECT id, user_id, model_id, region_id, count, start_at, end_at, status, coalesce(offer_expires_at, 0), auto_book, duration_hours
		FROM waitlist_entries WHERE status = 'waiting' OR (status = 'offered' AND offer_expires_at <= ?) ORDER BY id`, unix(now))
	if err != nil {
		return err
	}
	span := map[plan.PoolKey][2]time.Time{}
	for _, w := range entries {
		sp, seen := span[w.Pool]
		if !seen || w.Start.Before(sp[0]) {
			sp[0] = w.Start
		}
		if !seen || w.End.After(sp[1]) {
			sp[1] = w.End
		}
		span[w.Pool] = sp
	}
	for key, sp := range span {
		pl, err := db.poolOf(ctx, q, s, key, now)
		if err != nil {
			return err
		}
		capacity, err := db.reservableNow(ctx, q, key.Model, key.Region, pl.Policy, false)
		if err != nil {
			return err
		}
		free := map[int64]int{}
		for _, h := range plan.Hours(sp[0], sp[1]) {
			free[h.Unix()] = capacity
		}
		reserved, err := reservedByHour(ctx, q, key.Model, key.Region, sp[0], sp[1])
		if err != nil {
			return err
		}
		for hour, n := range reserved {
			// Not gpuportal.FreeInHour: the planner adds back the GPUs of
			// offers that lapse, so an hour booked over its capacity must
			// keep its negative count.
			free[hour] = capacity - n
		}
		s.FreeHours[key] = free
	}
	available := map[int64]gpuportal.Fen{}
	for k := range entries {
		w := &entries[k]
		pl := s.Pools[w.Pool]
		if w.DurationHours == 0 {
			w.Price = gpuportal.QuoteFor(pl.Model, w.Count, w.Start, w.End, pl.Policy, db.Location).Total
		}
		a, seen := available[w.UserID]
		if !seen {
			b, err := db.balanceIn(ctx, q, w.UserID, now)
			if err != nil {
				return err
			}
			a = b.Available
			available[w.UserID] = a
		}
		w.Available = a
	}
	s.Waitlist = entries
	return nil
}
