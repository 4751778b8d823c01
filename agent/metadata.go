package agent

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The metadata endpoint speaks the EC2 instance-metadata dialect so tools
// written for EC2 Spot (AWS SDKs, aws-node-termination-handler) work
// unchanged. One listener serves every instance of the node; each instance
// gets a base URL with a secret path segment
// (http://127.0.0.1:PORT/w/<secret>), so a workload sees only its own
// answers and cannot guess another's.

const (
	tokenTTLHeader = "X-aws-ec2-metadata-token-ttl-seconds"
	tokenHeader    = "X-aws-ec2-metadata-token"
	maxTokenTTL    = 21600
)

// metadataView is what one instance's endpoint shows.
type metadataView struct {
	instanceID string
	lifecycle  string
	deadline   time.Time // zero until an interruption is scheduled
}

type metadataServer struct {
	lookup func(secret string) (metadataView, bool)
	now    func() time.Time

	mu     sync.Mutex
	tokens map[string]tokenGrant // IMDSv2 tokens
}

type tokenGrant struct {
	secret  string
	expires time.Time
}

func newMetadataServer(lookup func(string) (metadataView, bool)) *metadataServer {
	return &metadataServer{lookup: lookup, now: time.Now, tokens: map[string]tokenGrant{}}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func (m *metadataServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/w/")
	secret, path, _ := strings.Cut(rest, "/")
	if !ok || secret == "" {
		http.NotFound(w, r)
		return
	}
	view, ok := m.lookup(secret)
	if !ok {
		http.NotFound(w, r)
		return
	}
	path = "/" + path
	if path == "/latest/api/token" {
		m.issueToken(w, r, secret)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	// IMDSv1-style GETs without a token work; a token, if sent, must be valid.
	if tok := r.Header.Get(tokenHeader); tok != "" && !m.validToken(tok, secret) {
		http.Error(w, "invalid or expired metadata token", http.StatusUnauthorized)
		return
	}
	text := func(s string) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte(s))
	}
	when := view.deadline.UTC().Format("2006-01-02T15:04:05Z")
	switch strings.TrimSuffix(path, "/") {
	case "/latest/meta-data":
		text("instance-id\ninstance-life-cycle\nspot/")
	case "/latest/meta-data/instance-id":
		text(view.instanceID)
	case "/latest/meta-data/instance-life-cycle":
		text(view.lifecycle)
	case "/latest/meta-data/spot":
		if view.deadline.IsZero() {
			http.NotFound(w, r)
			return
		}
		text("instance-action\ntermination-time")
	case "/latest/meta-data/spot/instance-action":
		if view.deadline.IsZero() {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"action": "terminate", "time": when})
	case "/latest/meta-data/spot/termination-time":
		if view.deadline.IsZero() {
			http.NotFound(w, r)
			return
		}
		text(when)
	default:
		http.NotFound(w, r)
	}
}

func (m *metadataServer) issueToken(w http.ResponseWriter, r *http.Request, secret string) {
	if r.Method != http.MethodPut {
		w.Header().Set("Allow", "PUT")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	ttl, err := strconv.Atoi(r.Header.Get(tokenTTLHeader))
	if err != nil || ttl < 1 || ttl > maxTokenTTL {
		http.Error(w, "missing or invalid "+tokenTTLHeader+" (1 to 21600)", http.StatusBadRequest)
		return
	}
	tok := randomHex(24)
	now := m.now()
	m.mu.Lock()
	for k, g := range m.tokens {
		if now.After(g.expires) {
			delete(m.tokens, k)
		}
	}
	m.tokens[tok] = tokenGrant{secret: secret, expires: now.Add(time.Duration(ttl) * time.Second)}
	m.mu.Unlock()
	w.Header().Set(tokenTTLHeader, strconv.Itoa(ttl))
	w.Header().Set("Content-Type", "text/plain")
	_, _ = w.Write([]byte(tok))
}

func (m *metadataServer) validToken(tok, secret string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	g, ok := m.tokens[tok]
	return ok && g.secret == secret && m.now().Before(g.expires)
}
