package store

import "sync"

// Wakeups tells long-polling agents that their node's desired state has
// changed, at once rather than at their next heartbeat. It is in-process;
// several portals on PostgreSQL relay it through LISTEN/NOTIFY.
type Wakeups struct {
	mu      sync.Mutex
	waiters map[string][]chan struct{}
}

// NewWakeups returns an empty Wakeups.
func NewWakeups() *Wakeups { return &Wakeups{waiters: map[string][]chan struct{}{}} }

// Wait returns a channel closed at the next Notify for nodeID, and a func
// to call when no longer waiting.
func (w *Wakeups) Wait(nodeID string) (<-chan struct{}, func()) {
	ch := make(chan struct{})
	w.mu.Lock()
	w.waiters[nodeID] = append(w.waiters[nodeID], ch)
	w.mu.Unlock()
	return ch, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		list := w.waiters[nodeID]
		for i, c := range list {
			if c == ch {
				w.waiters[nodeID] = append(list[:i], list[i+1:]...)
				break
			}
		}
		if len(w.waiters[nodeID]) == 0 {
			delete(w.waiters, nodeID)
		}
	}
}

// Notify wakes everyone waiting on the nodes.
func (w *Wakeups) Notify(nodeIDs ...string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, id := range nodeIDs {
		for _, ch := range w.waiters[id] {
			close(ch)
		}
		delete(w.waiters, id)
	}
}

// NotifyAll wakes every waiter (their wake-ups may have been missed).
func (w *Wakeups) NotifyAll() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for id, list := range w.waiters {
		for _, ch := range list {
			close(ch)
		}
		delete(w.waiters, id)
	}
}
