package sessions

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"strconv"
	"strings"
	"time"

	"gpuportal"
	"gpuportal/sessions/stream"
)

// AppBackend is what the web-app proxy needs of the store.
type AppBackend interface {
	SettingOrInit(ctx context.Context, key string, init func() string) (string, error)
	RedeemAppToken(ctx context.Context, token string, instanceID int64, port int) (int64, error)
}

// Names on an app's origin.
const (
	appCookie      = "gpuportal_app"
	appOpenPath    = "/__gpuportal/open"
	appCookieTTL   = 12 * time.Hour
	appKeySetting  = "app_cookie_key"
	appIdleTimeout = 90 * time.Second
)

// AppProxy serves a web app inside an instance (JupyterLab, TensorBoard)
// on an origin of its own, http://<instance id>-<port>.<Domain>/, to its
// owner only: a one-time token from the portal's origin becomes a cookie
// for that host alone, and each connection is a session into the
// instance. The portal's own cookies never reach the app (they are the
// portal host's), and the app's JavaScript never runs on the portal's
// origin.
type AppProxy struct {
	hub     *Hub
	backend AppBackend
	Domain  string
	key     []byte
	proxy   *httputil.ReverseProxy
	log     *slog.Logger
}

// NewAppProxy makes the proxy for apps under domain (e.g. "localhost",
// "apps.example.com"); the cookie key is kept in the database, so every
// portal accepts every other's cookies.
func NewAppProxy(ctx context.Context, hub *Hub, backend AppBackend, domain string, log *slog.Logger) (*AppProxy, error) {
	if log == nil {
		log = slog.Default()
	}
	raw, err := backend.SettingOrInit(ctx, appKeySetting, func() string {
		var b [32]byte
		_, _ = rand.Read(b[:])
		return hex.EncodeToString(b[:])
	})
	if err != nil {
		return nil, fmt.Errorf("app proxy key: %w", err)
	}
	key, err := hex.DecodeString(raw)
	if err != nil {
		return nil, fmt.Errorf("app proxy key: %w", err)
	}
	p := &AppProxy{hub: hub, backend: backend, Domain: strings.ToLower(strings.Trim(domain, ".")), key: key, log: log}
	transport := &http.Transport{
		DialContext:         p.dial,
		MaxIdleConnsPerHost: 4,
		IdleConnTimeout:     appIdleTimeout,
		ForceAttemptHTTP2:   false,
	}
	p.proxy = &httputil.ReverseProxy{
		Transport: transport,
		Rewrite: func(pr *httputil.ProxyRequest) {
			uid := pr.In.Context().Value(appUserKey{}).(int64)
			id, port, _ := p.Match(pr.In.Host)
			pr.Out.URL.Scheme = "http"
			// The pool's key: one user's connections to one port of one
			// instance, never another's.
			pr.Out.URL.Host = fmt.Sprintf("u%d-i%d-p%d", uid, id, port)
			pr.Out.Host = pr.In.Host // apps (Jupyter) check Origin against Host
			pr.SetXForwarded()
			stripCookie(pr.Out, appCookie)
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			id, port, _ := p.Match(r.Host)
			http.Error(w, fmt.Sprintf("gpuportal: nothing answers on port %d of instance %d (%v).", port, id, err), http.StatusBadGateway)
		},
	}
	return p, nil
}

type appUserKey struct{}

// Match reads an app's host: <instance id>-<port>.<Domain>[:port].
func (p *AppProxy) Match(host string) (instanceID int64, port int, ok bool) {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	label, ok := strings.CutSuffix(strings.ToLower(host), "."+p.Domain)
	if !ok || strings.Contains(label, ".") {
		return 0, 0, false
	}
	idText, portText, ok := strings.Cut(label, "-")
	if !ok {
		return 0, 0, false
	}
	id, err1 := strconv.ParseInt(idText, 10, 64)
	port, err2 := strconv.Atoi(portText)
	if err1 != nil || err2 != nil || id <= 0 || port < 1 || port > 65535 {
		return 0, 0, false
	}
	return id, port, true
}

// OpenURL is where the portal sends the owner with a handed-over token:
// the app's origin, with the portal's scheme and port.
func (p *AppProxy) OpenURL(scheme, portalPort string, instanceID int64, port int, token string) string {
	host := fmt.Sprintf("%d-%d.%s", instanceID, port, p.Domain)
	if portalPort != "" && !(scheme == "http" && portalPort == "80") && !(scheme == "https" && portalPort == "443") {
		host += ":" + portalPort
	}
	return scheme + "://" + host + appOpenPath + "?token=" + token
}

// ServeHTTP serves a request on an app's origin (Match is true for it).
func (p *AppProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id, port, ok := p.Match(r.Host)
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Referrer-Policy", "no-referrer")
	if r.URL.Path == appOpenPath {
		uid, err := p.backend.RedeemAppToken(r.Context(), r.URL.Query().Get("token"), id, port)
		if err != nil {
			http.Error(w, "gpuportal: "+gpuportal.ErrorMessage(err), http.StatusForbidden)
			return
		}
		exp := time.Now().Add(appCookieTTL).Unix()
		http.SetCookie(w, &http.Cookie{Name: appCookie, Value: p.sign(uid, id, port, exp), Path: "/", HttpOnly: true,
			SameSite: http.SameSiteLaxMode, Secure: r.TLS != nil, MaxAge: int(appCookieTTL / time.Second)})
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	c, err := r.Cookie(appCookie)
	uid, valid := int64(0), false
	if err == nil {
		uid, valid = p.verify(c.Value, id, port)
	}
	if !valid {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprintf(w, "gpuportal: open port %d of instance %d from the instance's page on the portal.\n", port, id)
		return
	}
	p.proxy.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), appUserKey{}, uid)))
}

// sign makes the app cookie: who, which instance and port, until when.
func (p *AppProxy) sign(uid, id int64, port int, exp int64) string {
	msg := fmt.Sprintf("%d.%d.%d.%d", uid, id, port, exp)
	m := hmac.New(sha256.New, p.key)
	m.Write([]byte(msg))
	return msg + "." + hex.EncodeToString(m.Sum(nil))
}

func (p *AppProxy) verify(value string, id int64, port int) (int64, bool) {
	parts := strings.Split(value, ".")
	if len(parts) != 5 {
		return 0, false
	}
	uid, err1 := strconv.ParseInt(parts[0], 10, 64)
	cid, err2 := strconv.ParseInt(parts[1], 10, 64)
	cport, err3 := strconv.Atoi(parts[2])
	exp, err4 := strconv.ParseInt(parts[3], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || err4 != nil || cid != id || cport != port || time.Now().Unix() > exp {
		return 0, false
	}
	if !hmac.Equal([]byte(p.sign(uid, cid, cport, exp)), []byte(value)) {
		return 0, false
	}
	return uid, true
}

// dial opens a session to the port the pool key names.
func (p *AppProxy) dial(ctx context.Context, _, addr string) (net.Conn, error) {
	host, _, _ := net.SplitHostPort(addr)
	var uid, id int64
	var port int
	if _, err := fmt.Sscanf(host, "u%d-i%d-p%d", &uid, &id, &port); err != nil {
		return nil, fmt.Errorf("app proxy: bad pool key %q", host)
	}
	c, done, err := p.hub.Open(ctx, &gpuportal.User{ID: uid}, id, gpuportal.SessionRequest{Kind: gpuportal.SessionTCP, Port: port, Group: host})
	if err != nil {
		return nil, err
	}
	return &streamNetConn{Conn: c, done: done}, nil
}

// stripCookie removes one cookie from a request's Cookie headers.
func stripCookie(r *http.Request, name string) {
	cookies := r.Cookies()
	r.Header.Del("Cookie")
	for _, c := range cookies {
		if c.Name != name {
			r.AddCookie(c)
		}
	}
}

// streamNetConn is a session stream as a net.Conn (for http.Transport).
type streamNetConn struct {
	*stream.Conn
	done func()
}

func (c *streamNetConn) Close() error                     { c.done(); return nil }
func (c *streamNetConn) LocalAddr() net.Addr              { return appAddr{} }
func (c *streamNetConn) RemoteAddr() net.Addr             { return appAddr{} }
func (c *streamNetConn) SetDeadline(time.Time) error      { return nil }
func (c *streamNetConn) SetReadDeadline(time.Time) error  { return nil }
func (c *streamNetConn) SetWriteDeadline(time.Time) error { return nil }

type appAddr struct{}

func (appAddr) Network() string { return "gpuportal-session" }
func (appAddr) String() string  { return "instance" }
