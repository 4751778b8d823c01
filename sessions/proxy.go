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
	UserByID(ctx context.Context, id int64) (*gpuportal.User, error)
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
	// IsHTTPS says whether a request came over HTTPS (here, or at a
	// proxy the portal trusts): the app cookie is Secure then. Default:
	// TLS on this connection.
	IsHTTPS func(*http.Request) bool
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
	p := &AppProxy{hub: hub, backend: backend, Domain: strings.ToLower(strings.Trim(domain, ".")), key: key, log: log,
		IsHTTPS: func(r *http.Request) bool { return r.TLS != nil }}
	transport := &http.Transport{
		DialContext:         p.dial,
		MaxIdleConnsPerHost: 4,
		// A pool key is one session group: beyond the streams a group may
		// hold, requests wait for a connection rather than fail.
		MaxConnsPerHost:   gpuportal.MaxStreamsPerConnection,
		IdleConnTimeout:   appIdleTimeout,
		ForceAttemptHTTP2: false,
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
		ModifyResponse: func(resp *http.Response) error {
			ownCookiesOnly(resp.Header)
			return nil
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
		var u *gpuportal.User
		if err == nil {
			u, err = p.activeUser(r.Context(), uid)
		}
		if err != nil {
			http.Error(w, "gpuportal: "+gpuportal.ErrorMessage(err), http.StatusForbidden)
			return
		}
		exp := time.Now().Add(appCookieTTL).Unix()
		http.SetCookie(w, &http.Cookie{Name: appCookie, Value: p.sign(uid, id, port, exp, u.SessionVersion), Path: "/", HttpOnly: true,
			SameSite: http.SameSiteLaxMode, Secure: p.IsHTTPS(r), MaxAge: int(appCookieTTL / time.Second)})
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	c, err := r.Cookie(appCookie)
	uid, valid := int64(0), false
	if err == nil {
		uid, valid = p.verify(r.Context(), c.Value, id, port)
	}
	if !valid {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprintf(w, "gpuportal: open port %d of instance %d from the instance's page on the portal.\n", port, id)
		return
	}
	p.proxy.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), appUserKey{}, uid)))
}

// sign makes the app cookie: who (at which session version), which
// instance and port, until when.
func (p *AppProxy) sign(uid, id int64, port int, exp, version int64) string {
	msg := fmt.Sprintf("%d.%d.%d.%d.%d", uid, id, port, exp, version)
	m := hmac.New(sha256.New, p.key)
	m.Write([]byte(msg))
	return msg + "." + hex.EncodeToString(m.Sum(nil))
}

// verify checks an app cookie: signed by a portal, for this instance and
// port, not expired — and its user still active at the session version
// it was made at, so a password change, a logout everywhere or a
// disabled account ends it as it ends the portal's sessions.
func (p *AppProxy) verify(ctx context.Context, value string, id int64, port int) (int64, bool) {
	parts := strings.Split(value, ".")
	if len(parts) != 6 {
		return 0, false
	}
	uid, err1 := strconv.ParseInt(parts[0], 10, 64)
	cid, err2 := strconv.ParseInt(parts[1], 10, 64)
	cport, err3 := strconv.Atoi(parts[2])
	exp, err4 := strconv.ParseInt(parts[3], 10, 64)
	version, err5 := strconv.ParseInt(parts[4], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || err4 != nil || err5 != nil || cid != id || cport != port || time.Now().Unix() > exp {
		return 0, false
	}
	if !hmac.Equal([]byte(p.sign(uid, cid, cport, exp, version)), []byte(value)) {
		return 0, false
	}
	u, err := p.activeUser(ctx, uid)
	if err != nil || u.SessionVersion != version {
		return 0, false
	}
	return uid, true
}

// activeUser is the user uid, unless the account is gone or disabled.
func (p *AppProxy) activeUser(ctx context.Context, uid int64) (*gpuportal.User, error) {
	u, err := p.backend.UserByID(ctx, uid)
	if err != nil {
		return nil, err
	}
	if u.Disabled {
		return nil, gpuportal.Errorf(gpuportal.EFORBIDDEN, "This account is disabled; contact support.")
	}
	return u, nil
}

// ownCookiesOnly keeps an app's cookies on its own host: a Set-Cookie
// with Domain= (the proxy domain, or a parent of it) would reach every
// other app and, where the portal shares a parent domain, the portal
// itself — an app could sign its owner's portal pages into another
// account. Domain goes; so does a cookie that would shadow the proxy's
// own, and one that does not parse.
func ownCookiesOnly(h http.Header) {
	lines := h.Values("Set-Cookie")
	if len(lines) == 0 {
		return
	}
	h.Del("Set-Cookie")
	for _, line := range lines {
		c, err := http.ParseSetCookie(line)
		if err != nil || c.Name == appCookie {
			continue
		}
		c.Domain = ""
		if v := c.String(); v != "" {
			h.Add("Set-Cookie", v)
		}
	}
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
