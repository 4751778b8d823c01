package agent

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"gpuportal"
)

// The metadata endpoint speaks the EC2 instance-metadata dialect so tools
// written for EC2 Spot (AWS SDKs, aws-node-termination-handler) work
// unchanged. It is served at the root path (http://127.0.0.1:PORT/latest/…):
// the AWS SDK for Go v2 keeps only the scheme and host of
// AWS_EC2_METADATA_SERVICE_ENDPOINT, so any path prefix would turn every
// request into a 404. Each instance therefore gets a listener of its own
// (for exec, a loopback port of its own), whose handler answers for that
// instance alone.

const (
	tokenTTLHeader = "X-aws-ec2-metadata-token-ttl-seconds"
	tokenHeader    = "X-aws-ec2-metadata-token"
	maxTokenTTL    = 21600
)

// metadataView is what one instance's endpoint shows.
type metadataView struct {
	instanceID string
	lifecycle  gpuportal.Lifecycle
	deadline   time.Time              // zero until an interruption is scheduled
	action     gpuportal.NoticeAction // terminate (default) or stop
	rebalance  time.Time              // zero until a rebalance recommendation came
}

// metadataServer holds what every instance's endpoint shares: the view of
// each instance, and the key its IMDSv2 tokens are signed with. Tokens are
// stateless — "<expiry>.<HMAC of instance id and expiry>" — so a workload
// asking for millions of them costs the agent nothing to keep, and no lock
// is shared between tenants; a token is valid for its own instance only.
type metadataServer struct {
	lookup func(instanceID int64) (metadataView, bool)
	// report takes a workload's own report (reportCheckpoint or
	// reportReady) and answers with an HTTP status and a line of text.
	report func(instanceID int64, kind string) (int, string)
	now    func() time.Time
	key    []byte // signs tokens; new at every agent start
}

// What a workload reports to its metadata endpoint (gpuportal's own
// paths beside the EC2 dialect).
const (
	reportCheckpoint = "checkpoint" // PUT /gpuportal/checkpoint: my state is saved
	reportReady      = "ready"      // PUT /gpuportal/ready: saved after the notice; stop me now
)

func newMetadataServer(lookup func(int64) (metadataView, bool), report func(int64, string) (int, string)) *metadataServer {
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	return &metadataServer{lookup: lookup, report: report, now: time.Now, key: key}
}

// tokenFor signs an instance's token valid until expires (Unix seconds).
func (m *metadataServer) tokenFor(id, expires int64) string {
	mac := hmac.New(sha256.New, m.key)
	fmt.Fprintf(mac, "%d.%d", id, expires)
	return strconv.FormatInt(expires, 10) + "." + hex.EncodeToString(mac.Sum(nil))
}

// forInstance is the handler of one instance's endpoint.
func (m *metadataServer) forInstance(id int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { m.serve(w, r, id) })
}

func (m *metadataServer) serve(w http.ResponseWriter, r *http.Request, id int64) {
	view, ok := m.lookup(id)
	if !ok {
		http.NotFound(w, r)
		return
	}
	path := r.URL.Path
	if path == "/latest/api/token" {
		m.issueToken(w, r, id)
		return
	}
	if kind, ok := strings.CutPrefix(path, "/gpuportal/"); ok && (kind == reportCheckpoint || kind == reportReady) {
		if r.Method != http.MethodPut && r.Method != http.MethodPost {
			w.Header().Set("Allow", "PUT, POST")
			http.Error(w, "method not allowed: PUT it", http.StatusMethodNotAllowed)
			return
		}
		if tok := r.Header.Get(tokenHeader); tok != "" && !m.validToken(tok, id) {
			http.Error(w, "invalid or expired metadata token", http.StatusUnauthorized)
			return
		}
		status, msg := m.report(id, kind)
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(msg + "\n"))
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	// IMDSv1-style GETs without a token work; a token, if sent, must be valid.
	if tok := r.Header.Get(tokenHeader); tok != "" && !m.validToken(tok, id) {
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
		text("events/\ninstance-id\ninstance-life-cycle\nspot/")
	case "/latest/meta-data/events":
		text("recommendations/")
	case "/latest/meta-data/events/recommendations":
		text("rebalance")
	case "/latest/meta-data/events/recommendations/rebalance":
		// EC2's shape: {"noticeTime": "…Z"}; 404 until one is posted.
		if view.rebalance.IsZero() {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"noticeTime": view.rebalance.UTC().Format("2006-01-02T15:04:05Z")})
	case "/latest/meta-data/instance-id":
		text(view.instanceID)
	case "/latest/meta-data/instance-life-cycle":
		text(string(view.lifecycle))
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
		action := view.action
		if action == "" {
			action = gpuportal.NoticeTerminate
		}
		_ = json.NewEncoder(w).Encode(map[string]string{"action": string(action), "time": when})
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

func (m *metadataServer) issueToken(w http.ResponseWriter, r *http.Request, id int64) {
	if r.Method != http.MethodPut {
		w.Header().Set("Allow", "PUT")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	// As on EC2: a token request that came through a proxy (it says so
	// with X-Forwarded-For) is refused, so a proxy the workload runs
	// cannot hand tokens to whoever reaches it.
	if _, proxied := r.Header["X-Forwarded-For"]; proxied {
		http.Error(w, "forbidden: token requests through a proxy (X-Forwarded-For) are refused", http.StatusForbidden)
		return
	}
	ttl, err := strconv.Atoi(r.Header.Get(tokenTTLHeader))
	if err != nil || ttl < 1 || ttl > maxTokenTTL {
		http.Error(w, "missing or invalid "+tokenTTLHeader+" (1 to 21600)", http.StatusBadRequest)
		return
	}
	tok := m.tokenFor(id, m.now().Add(time.Duration(ttl)*time.Second).Unix())
	w.Header().Set(tokenTTLHeader, strconv.Itoa(ttl))
	w.Header().Set("Content-Type", "text/plain")
	_, _ = w.Write([]byte(tok))
}

func (m *metadataServer) validToken(tok string, id int64) bool {
	exp, _, ok := strings.Cut(tok, ".")
	expires, err := strconv.ParseInt(exp, 10, 64)
	if !ok || err != nil || m.now().Unix() >= expires {
		return false
	}
	return hmac.Equal([]byte(tok), []byte(m.tokenFor(id, expires)))
}

// metadataView answers an instance's metadata endpoint.
func (a *Agent) metadataView(instanceID int64) (metadataView, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	w, ok := a.workloads[instanceID]
	if !ok {
		return metadataView{}, false
	}
	v := metadataView{instanceID: strconv.FormatInt(w.rec.InstanceID, 10), lifecycle: w.rec.Lifecycle, rebalance: w.rec.RebalanceAt}
	if !w.rec.NoticeAt.IsZero() {
		v.deadline, v.action = w.rec.Deadline, w.rec.Action
	}
	return v, true
}

// workloadReport takes a workload's report to its metadata endpoint: a
// checkpoint is kept and passed on to the portal at once (it stamps it);
// "ready" after a notice also stops the workload now — SIGTERM at once,
// SIGKILL after the grace — so its GPUs free early and its billing ends.
func (a *Agent) workloadReport(instanceID int64, kind string) (int, string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	w, ok := a.workloads[instanceID]
	if !ok || w.exited || w.proc == nil {
		return http.StatusConflict, "the workload is not running"
	}
	now := a.clock.Now()
	switch kind {
	case reportCheckpoint:
		w.rec.CheckpointAt = now
		a.log.Info("checkpoint reported", "instance", instanceID)
	case reportReady:
		if w.rec.NoticeAt.IsZero() {
			return http.StatusConflict, "no interruption notice is pending; report saved state with PUT /gpuportal/checkpoint"
		}
		if w.rec.Drill {
			// A drill: the notice is withdrawn at once and the workload
			// keeps running; the portal keeps how long it took.
			after := now.Sub(w.rec.NoticeAt).Seconds()
			w.rec.CheckpointAt, w.rec.DrillReadyAfter = now, &after
			w.rec.withdrawNotice()
			a.log.Info("drill: workload ready", "instance", instanceID, "after_seconds", after)
			a.persistLocked()
			a.pushNow()
			return http.StatusOK, fmt.Sprintf("drill: ready after %.1f s; the notice is withdrawn and the workload keeps running", after)
		}
		w.rec.CheckpointAt, w.rec.ReadyAt = now, now
		if !w.rec.TermSent && w.rec.Deadline.After(now) {
			w.rec.Deadline = now
		}
		a.log.Info("workload ready after its notice: stopping it now", "instance", instanceID)
		a.wakeEnforcer()
	}
	a.persistLocked()
	a.pushNow()
	return http.StatusOK, "recorded at " + now.UTC().Format(time.RFC3339)
}

// serveMetadataLocked opens the instance's own metadata listener on addr
// and returns the endpoint's URL (root path, as the AWS SDKs want it).
func (a *Agent) serveMetadataLocked(w *workload, addr string) (string, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return "", err
	}
	w.rec.MetaAddr = l.Addr().String()
	a.log.Info("metadata endpoint listening", "instance", w.rec.InstanceID, "addr", w.rec.MetaAddr)
	a.serveMetadataOnLocked(w, l)
	return "http://" + w.rec.MetaAddr, nil
}

// serveMetadataOnLocked answers the instance's metadata requests on l.
func (a *Agent) serveMetadataOnLocked(w *workload, l net.Listener) {
	w.metaSrv = &http.Server{Handler: a.meta.forInstance(w.rec.InstanceID), ReadHeaderTimeout: 5 * time.Second}
	go func(srv *http.Server) { _ = srv.Serve(l) }(w.metaSrv)
}

func (a *Agent) closeMetadataLocked(w *workload) {
	if w.metaSrv != nil {
		_ = w.metaSrv.Close()
		w.metaSrv = nil
	}
}
