package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"gpuportal"
)

// The state directory holds the node's credentials (node.json, 0600), the
// workloads it runs (workloads.json, for re-adoption after a restart) and
// their logs (logs/instance-N.log).

type credentials struct {
	Portal    string `json:"portal"`
	NodeID    string `json:"node_id"`
	NodeToken string `json:"node_token"`
}

// workloadRecord is what survives an agent restart about a workload.
type workloadRecord struct {
	InstanceID int64               `json:"instance_id"`
	Attempt    int                 `json:"attempt"`
	Lifecycle  gpuportal.Lifecycle `json:"lifecycle"`
	GPUs       []string            `json:"gpus"`
	// Slot makes the workload's UID without a user namespace: its first
	// GPU's index, or one past the GPUs for a workload with none.
	Slot          int       `json:"slot,omitempty"`
	Command       string    `json:"command"`
	DiskGiB       int       `json:"disk_gib,omitempty"`
	DiskKept      bool      `json:"disk_kept,omitempty"` // the portal keeps its disk past this run
	CheckpointDir string    `json:"checkpoint_dir"`
	ProcessID     string    `json:"process_id"`
	StartTicks    uint64    `json:"start_ticks"`
	StartedAt     time.Time `json:"started_at"`
	// MetaAddr is the instance's metadata endpoint (host:port), served
	// again at the same address after an agent restart.
	MetaAddr string `json:"meta_addr,omitempty"`
	// The interruption, in this machine's clock, if one was ordered.
	NoticeAt  time.Time                 `json:"notice_at,omitzero"`
	Deadline  time.Time                 `json:"deadline,omitzero"`
	Grace     float64                   `json:"grace_seconds,omitempty"`
	Reason    gpuportal.InterruptReason `json:"reason,omitempty"`
	Action    gpuportal.NoticeAction    `json:"action,omitempty"` // what the notice says: terminate, or stop
	TermSent  bool                      `json:"term_sent,omitempty"`
	KillSent  bool                      `json:"kill_sent,omitempty"`
	StopAsked bool                      `json:"stop_asked,omitempty"`
	// The workload's own reports to its metadata endpoint, in this
	// machine's clock: its last checkpoint, and "ready" after a notice.
	CheckpointAt time.Time `json:"checkpoint_at,omitzero"`
	ReadyAt      time.Time `json:"ready_at,omitzero"`
	// RebalanceAt: when the portal's rebalance recommendation arrived.
	RebalanceAt time.Time `json:"rebalance_at,omitzero"`
	// Drill: the notice is a rehearsal (never signalled); DrillID names
	// it, DrillReadyAfter is how long after it the workload said ready.
	Drill           bool     `json:"drill,omitempty"`
	DrillID         int64    `json:"drill_id,omitempty"`
	DrillReadyAfter *float64 `json:"drill_ready_after,omitempty"`
}

func readJSON(path string, v any) (bool, error) {
	raw, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return false, fmt.Errorf("%s: %w", path, err)
	}
	return true, nil
}

// writeJSON replaces path atomically (write, fsync, rename), mode 0600.
func writeJSON(path string, v any) error {
	raw, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(raw); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// persistLocked writes the running workloads to the state directory.
func (a *Agent) persistLocked() {
	var recs []workloadRecord
	for _, w := range a.workloads {
		// Running workloads are re-adopted after a restart; an exit the
		// portal has not acknowledged is kept too, so that a restarted
		// agent still reports it (re-adoption finds it gone).
		if (!w.exited && w.proc != nil) || (w.exited && !w.acked) {
			recs = append(recs, w.rec)
		}
	}
	if err := writeJSON(filepath.Join(a.cfg.StateDir, "workloads.json"), recs); err != nil {
		a.log.Error("save workload state", "err", err)
	}
}

// withdrawNotice forgets the interruption notice (a real one called off,
// or a drill's): the metadata shows none, and nothing is signalled.
func (r *workloadRecord) withdrawNotice() {
	r.NoticeAt, r.Deadline, r.Grace, r.Reason, r.Action, r.Drill = time.Time{}, time.Time{}, 0, "", "", false
}
