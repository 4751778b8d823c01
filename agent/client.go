package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"gpuportal"
)

// client talks to the portal's agent API.
type client struct {
	base  string
	http  *http.Client
	token atomic.Pointer[string] // the node token; replaced by a rotation while requests run
}

func (c *client) setToken(t string) { c.token.Store(&t) }

// errRejected means the portal refused our credentials or request for
// good (401/403/4xx): retrying will not help.
var errRejected = errors.New("rejected by the portal")

func (c *client) post(ctx context.Context, path string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(c.base, "/")+"/api/v1/agent/"+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if t := c.token.Load(); t != nil && *t != "" {
		req.Header.Set("Authorization", "Bearer "+*t)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if resp.StatusCode >= 400 && resp.StatusCode < 500 && resp.StatusCode != http.StatusTooManyRequests {
		return fmt.Errorf("%w: %s %s: %s", errRejected, path, resp.Status, strings.TrimSpace(string(raw)))
	}
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusCreated {
		return fmt.Errorf("%s: %s", path, resp.Status)
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(raw, out)
}

func (c *client) register(ctx context.Context, r gpuportal.AgentRegistration) (gpuportal.AgentCredentials, error) {
	var out gpuportal.AgentCredentials
	err := c.post(ctx, "register", r, &out)
	return out, err
}

func (c *client) heartbeat(ctx context.Context, hb gpuportal.AgentHeartbeat) (gpuportal.AgentDesired, error) {
	var out gpuportal.AgentDesired
	err := c.post(ctx, "heartbeat", hb, &out)
	return out, err
}

func (c *client) rotateToken(ctx context.Context) (gpuportal.AgentCredentials, error) {
	var out gpuportal.AgentCredentials
	err := c.post(ctx, "rotate-token", struct{}{}, &out)
	return out, err
}

func (c *client) events(ctx context.Context, ev gpuportal.AgentEvents) error {
	return c.post(ctx, "events", ev, nil)
}

// backoff is exponential with full jitter: retries from many agents after
// a portal restart spread out instead of arriving together.
type backoff struct {
	attempt int
	min     time.Duration
	max     time.Duration
}

func (b *backoff) next() time.Duration {
	d := b.min << min(b.attempt, 16)
	if d > b.max || d <= 0 {
		d = b.max
	}
	b.attempt++
	return d/2 + rand.N(d/2+1)
}

func (b *backoff) reset() { b.attempt = 0 }

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
