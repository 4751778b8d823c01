// Package sessions is the portal's side of interactive sessions into
// instances: the SSH gateway, the web terminal's WebSocket and the web-app
// proxy. Each authenticates its customer, opens a session (the store asks
// the instance's node to connect out for it) and joins the customer's
// connection to the agent's stream when it arrives. It holds no store or
// page code: Backend is what it needs of the store.
package sessions

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/coder/websocket"

	"gpuportal"
	"gpuportal/sessions/stream"
)

// Backend is what sessions need of the store.
type Backend interface {
	SettingOrInit(ctx context.Context, key string, init func() string) (string, error)
	SessionUser(ctx context.Context, instanceID int64, fingerprint string) (*gpuportal.User, error)
	VolumeSessionUser(ctx context.Context, volumeID int64, fingerprint string) (*gpuportal.User, error)
	OpenSession(ctx context.Context, user *gpuportal.User, instanceID int64, req gpuportal.SessionRequest, url string) (gpuportal.Session, error)
	CloseSession(ctx context.Context, id string) error
	SeeSessions(ctx context.Context, ids []string) error
}

// Hub pairs the sessions this portal opened with the agents' streams that
// connect out for them.
type Hub struct {
	backend  Backend
	agentURL string // this portal's address as agents reach it ("" = the one they know)
	log      *slog.Logger
	// ConnectTimeout is how long a session waits for its agent
	// (gpuportal.SessionConnectTimeout unless a test shortens it).
	ConnectTimeout time.Duration

	mu      sync.Mutex
	waiting map[string]chan arrival
	live    map[string]*stream.Conn
	// forwards take the agent's streams to the client's SSH agent of the
	// live sessions that forward one (ssh -A), by session id.
	forwards map[string]func(*stream.Conn)
}

type arrival struct {
	conn *stream.Conn
	done chan struct{} // closed by the session when it is over with the stream
}

// NewHub makes a hub. agentURL is where agents reach this portal (set it
// when several portals share a database); "" lets them use their own.
func NewHub(b Backend, agentURL string, log *slog.Logger) *Hub {
	if log == nil {
		log = slog.Default()
	}
	return &Hub{backend: b, agentURL: agentURL, log: log, ConnectTimeout: gpuportal.SessionConnectTimeout,
		waiting: map[string]chan arrival{}, live: map[string]*stream.Conn{}, forwards: map[string]func(*stream.Conn){}}
}

// Run marks this portal's open sessions seen until ctx ends, so that the
// per-user limit forgets those of a portal that died.
func (h *Hub) Run(ctx context.Context) {
	t := time.NewTicker(gpuportal.SessionSeenEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		h.mu.Lock()
		ids := make([]string, 0, len(h.live)+len(h.waiting))
		for id := range h.live {
			ids = append(ids, id)
		}
		for id := range h.waiting {
			ids = append(ids, id)
		}
		h.mu.Unlock()
		if err := h.backend.SeeSessions(ctx, ids); err != nil && ctx.Err() == nil {
			h.log.Warn("mark sessions seen", "err", err)
		}
	}
}

// Open is a session: opened in the store, then the agent's stream, once
// it connects (within gpuportal.SessionConnectTimeout). Call done when the
// session is over; it closes the stream and the session.
func (h *Hub) Open(ctx context.Context, user *gpuportal.User, instanceID int64, req gpuportal.SessionRequest) (conn *stream.Conn, done func(), err error) {
	return h.OpenForwarding(ctx, user, instanceID, req, nil)
}

// OpenForwarding is Open for a session that forwards the client's SSH
// agent (req.AgentForward): each stream the agent opens for it while it
// is live goes to forward, which serves it until it ends.
func (h *Hub) OpenForwarding(ctx context.Context, user *gpuportal.User, instanceID int64, req gpuportal.SessionRequest, forward func(*stream.Conn)) (conn *stream.Conn, done func(), err error) {
	req.AgentForward = forward != nil
	// Waiting before the store asks the agent: it may connect at once.
	req.ID = gpuportal.NewSessionID()
	ch := make(chan arrival, 1)
	h.mu.Lock()
	h.waiting[req.ID] = ch
	h.mu.Unlock()
	s, err := h.backend.OpenSession(ctx, user, instanceID, req, h.agentURL)
	if err != nil {
		h.mu.Lock()
		delete(h.waiting, req.ID)
		h.mu.Unlock()
		return nil, nil, err
	}
	closeSession := func() {
		// Not the customer's context: it may be gone already.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if err := h.backend.CloseSession(cctx, s.ID); err != nil {
			h.log.Warn("close session", "session", s.ID, "err", err)
		}
	}
	timer := time.NewTimer(h.ConnectTimeout)
	defer timer.Stop()
	var a arrival
	select {
	case a = <-ch:
	case <-timer.C:
		err = gpuportal.Errorf(gpuportal.EUNAVAILABLE, "The node of instance %d did not connect for the session; try again.", instanceID)
		if req.Kind == gpuportal.SessionVolume {
			err = gpuportal.Errorf(gpuportal.EUNAVAILABLE, "No node of the volume's region connected in time; try again.")
		}
	case <-ctx.Done():
		err = ctx.Err()
	}
	h.mu.Lock()
	delete(h.waiting, s.ID)
	if err == nil {
		h.live[s.ID] = a.conn
		if forward != nil {
			h.forwards[s.ID] = forward
		}
	}
	h.mu.Unlock()
	if err != nil {
		closeSession()
		return nil, nil, err
	}
	var once sync.Once
	return a.conn, func() {
		once.Do(func() {
			h.mu.Lock()
			delete(h.live, s.ID)
			delete(h.forwards, s.ID)
			h.mu.Unlock()
			_ = a.conn.Close()
			close(a.done)
			closeSession()
		})
	}, nil
}

// Waiting reports whether session id waits on this portal for its stream.
func (h *Hub) Waiting(id string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.waiting[id] != nil
}

// ErrNotWaiting: no session of that id waits on this portal.
var ErrNotWaiting = errors.New("no such session waits here")

// Accept takes an agent's stream for session id (the caller has
// authenticated the node and claimed the session) and holds the request
// until the session is over with it.
func (h *Hub) Accept(w http.ResponseWriter, r *http.Request, id string) error {
	h.mu.Lock()
	ch := h.waiting[id]
	h.mu.Unlock()
	if ch == nil {
		return ErrNotWaiting
	}
	ws, err := websocket.Accept(w, r, nil)
	if err != nil {
		return err
	}
	// The stream lives as long as the session, not the request.
	a := arrival{conn: stream.Portal(context.WithoutCancel(r.Context()), ws), done: make(chan struct{})}
	select {
	case ch <- a:
	default:
		_ = ws.Close(websocket.StatusPolicyViolation, "session taken")
		return nil
	}
	<-a.done
	return nil
}

// AcceptForward takes an agent's stream to the client's SSH agent for
// live session id (the caller has authenticated the node and checked the
// session is its own and forwards) and serves it until it ends.
func (h *Hub) AcceptForward(w http.ResponseWriter, r *http.Request, id string) error {
	h.mu.Lock()
	forward := h.forwards[id]
	h.mu.Unlock()
	if forward == nil {
		return ErrNotWaiting
	}
	ws, err := websocket.Accept(w, r, nil)
	if err != nil {
		return err
	}
	c := stream.Portal(context.WithoutCancel(r.Context()), ws)
	defer c.CloseNow()
	forward(c)
	return nil
}

// Close ends every session this portal holds (at shutdown).
func (h *Hub) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range h.live {
		_ = c.CloseNow()
	}
}
