package web

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"strings"

	"github.com/gorilla/sessions"
	"github.com/labstack/echo/v4"

	"gpuportal"
	"gpuportal/i18n"
	"gpuportal/web/templates"
)

const (
	sessionCookie = "gpuportal_session"
	// secureSessionCookie is its name when the portal is served over
	// HTTPS (PublicURL): a __Host- cookie is Secure, for this host alone
	// and path /, so no other site under the same registrable domain (an
	// app's origin, say) can set or overwrite it.
	secureSessionCookie = "__Host-gpuportal_session"
	sessionMaxAge       = 14 * 24 * 3600
	csrfField           = "_csrf"
	csrfHeader          = "X-CSRF-Token"
)

// sessionStore wraps gorilla's signed and encrypted cookie store. Its keys
// come from PORTAL_SECRET or are generated once and kept in the database,
// so sessions survive a restart and work across several portals.
type sessionStore struct {
	cookies *sessions.CookieStore
}

func newSessionStore(ctx context.Context, db interface {
	SettingOrInit(ctx context.Context, key string, init func() string) (string, error)
}, secret string) (*sessionStore, error) {
	var hashKey, blockKey []byte
	if secret != "" {
		hashKey = deriveKey(secret, "session-hash")
		blockKey = deriveKey(secret, "session-block")
	} else {
		encoded, err := db.SettingOrInit(ctx, "session_keys", func() string {
			b := make([]byte, 64)
			_, _ = rand.Read(b)
			return base64.StdEncoding.EncodeToString(b)
		})
		if err != nil {
			return nil, err
		}
		raw, err := base64.StdEncoding.DecodeString(encoded)
		if err != nil || len(raw) != 64 {
			return nil, fmt.Errorf("session keys in the database are corrupt")
		}
		hashKey, blockKey = raw[:32], raw[32:]
	}
	cs := sessions.NewCookieStore(hashKey, blockKey)
	cs.Options = &sessions.Options{Path: "/", MaxAge: sessionMaxAge, HttpOnly: true, SameSite: http.SameSiteLaxMode}
	cs.MaxAge(sessionMaxAge)
	return &sessionStore{cookies: cs}, nil
}

func deriveKey(secret, label string) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(label))
	return m.Sum(nil)
}

// request is what the middleware learns about a request.
type request struct {
	user *gpuportal.User
	// member is the person when user is a team's account they act for;
	// team is the account of the team acted for, with its Acting (also
	// on a person's own pages, for the switcher and the header's balance).
	member  *gpuportal.User
	team    *gpuportal.User
	byToken bool // authenticated with an API token, not a cookie
	session *sessions.Session
	dirty   bool // the session must be saved
	lang    string
}

const requestKey = "gpuportal.request"

func reqOf(c echo.Context) *request {
	if r, ok := c.Get(requestKey).(*request); ok {
		return r
	}
	r := &request{lang: gpuportal.LangEnglish}
	c.Set(requestKey, r)
	return r
}

// currentUser returns the logged-in user or nil.
func currentUser(c echo.Context) *gpuportal.User { return reqOf(c).user }

// isAPI reports whether the request is for the JSON API.
func isAPI(c echo.Context) bool {
	return strings.HasPrefix(c.Request().URL.Path, "/api/")
}

func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// authenticate identifies the user (bearer token or session cookie), picks
// the language and, for pages, makes sure the session has a CSRF token.
func (s *Server) authenticate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := reqOf(c)
		ctx := c.Request().Context()
		if h := c.Request().Header.Get("Authorization"); h != "" {
			// A request that carries a token is judged by it alone: a bad
			// token is 401 everywhere, public routes included.
			secret, ok := strings.CutPrefix(h, "Bearer ")
			if !ok || strings.TrimSpace(secret) == "" {
				return gpuportal.Errorf(gpuportal.EUNAUTHORIZED, "The Authorization header must be \"Bearer <api token>\".")
			}
			if !strings.HasPrefix(c.Request().URL.Path, "/api/v1/agent/") {
				u, err := s.db.UserByAPIToken(ctx, strings.TrimSpace(secret))
				if err != nil {
					return err
				}
				r.user, r.byToken = u, true
			}
		} else if _, err := c.Request().Cookie(s.sessionCookie); err == nil || !isAPI(c) {
			sess, _ := s.sessions.cookies.Get(c.Request(), s.sessionCookie) // a bad cookie yields a new session
			r.session = sess
			if uid, ok := sess.Values["uid"].(int64); ok {
				u, err := s.db.UserByID(ctx, uid)
				if err != nil && gpuportal.ErrorCode(err) != gpuportal.ENOTFOUND {
					return err
				}
				// A session stamped with an older session version was
				// ended (logout, password change, promotion): a copied
				// cookie dies with it.
				if sv, _ := sess.Values["sv"].(int64); err == nil && sv == u.SessionVersion && !u.Disabled {
					r.user = u
				} else {
					delete(sess.Values, "uid")
					delete(sess.Values, "sv")
					r.dirty = true
				}
			}
			if _, ok := sess.Values["csrf"].(string); !ok && !isAPI(c) {
				sess.Values["csrf"] = randomToken()
				r.dirty = true
			}
		}
		r.lang = s.languageOf(c, r)
		c.SetRequest(c.Request().WithContext(i18n.WithLang(ctx, r.lang)))
		c.Response().Before(func() { s.saveSession(c) })
		return next(c)
	}
}

// languageOf: the user's remembered choice, else the session's, else the
// browser's Accept-Language.
func (s *Server) languageOf(c echo.Context, r *request) string {
	if r.user != nil && gpuportal.ValidLang(r.user.Lang) {
		return r.user.Lang
	}
	if r.session != nil {
		if l, ok := r.session.Values["lang"].(string); ok && gpuportal.ValidLang(l) {
			return l
		}
	}
	return i18n.Negotiate(c.Request().Header.Get("Accept-Language"))
}

// saveSession writes the session cookie if the request changed it; it runs
// just before the response headers go out.
func (s *Server) saveSession(c echo.Context) {
	r := reqOf(c)
	if r.session == nil || !r.dirty {
		return
	}
	r.session.Options.Secure = s.isHTTPS(c)
	if err := r.session.Save(c.Request(), c.Response().Writer); err != nil {
		s.log.Error("save session", "err", err)
	}
	r.dirty = false
}

// logIn starts a session for u (a new CSRF token too: never reuse one
// from before authentication).
func (s *Server) logIn(c echo.Context, u *gpuportal.User) {
	r := reqOf(c)
	if r.session == nil {
		r.session, _ = s.sessions.cookies.New(c.Request(), s.sessionCookie)
	}
	r.session.Values["uid"] = u.ID
	r.session.Values["sv"] = u.SessionVersion
	r.session.Values["csrf"] = randomToken()
	r.user = u
	r.dirty = true
}

// logOut ends every session of the user, this one and any copy of its
// cookie included (DESIGN §8: logout ends every session of that user).
func (s *Server) logOut(c echo.Context) error {
	r := reqOf(c)
	if r.user != nil {
		if err := s.db.EndSessions(c.Request().Context(), r.user.ID); err != nil {
			return err
		}
	}
	if r.session != nil {
		delete(r.session.Values, "uid")
		delete(r.session.Values, "sv")
		r.session.Values["csrf"] = randomToken()
		r.dirty = true
	}
	r.user = nil
	return nil
}

// addFlash queues a message for the next page the user sees.
func (s *Server) addFlash(c echo.Context, kind, text string) {
	r := reqOf(c)
	if r.session == nil {
		return
	}
	r.session.AddFlash(kind+"\x00"+text, "flash")
	r.dirty = true
}

func (s *Server) takeFlashes(c echo.Context) []templates.Flash {
	r := reqOf(c)
	if r.session == nil {
		return nil
	}
	var out []templates.Flash
	for _, f := range r.session.Flashes("flash") {
		if str, ok := f.(string); ok {
			kind, text, _ := strings.Cut(str, "\x00")
			out = append(out, templates.Flash{Kind: kind, Text: text})
		}
	}
	if len(out) > 0 {
		r.dirty = true
	}
	return out
}

func csrfToken(c echo.Context) string {
	if r := reqOf(c); r.session != nil {
		if t, ok := r.session.Values["csrf"].(string); ok {
			return t
		}
	}
	return ""
}

// checkCSRF refuses state-changing requests that ride on the session
// cookie without the session's CSRF token (form field or header). Requests
// authenticated by a bearer token, and API requests without a session
// cookie, carry no ambient authority and need none.
func (s *Server) checkCSRF(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		switch c.Request().Method {
		case http.MethodGet, http.MethodHead, http.MethodOptions:
			return next(c)
		}
		r := reqOf(c)
		if r.byToken || strings.HasPrefix(c.Request().URL.Path, "/api/v1/agent/") {
			return next(c)
		}
		if isAPI(c) && r.session == nil {
			return next(c)
		}
		want := csrfToken(c)
		got := c.Request().Header.Get(csrfHeader)
		if got == "" && !isAPI(c) && want != "" {
			// A multipart body is never parsed here: parsing spools its
			// files to disk before anyone knows who sent them. The file
			// manager's upload form carries its token as its first part,
			// which the handler checks before it reads a byte of a file
			// (checkFormCSRF); no other form is multipart.
			if isMultipart(c.Request()) {
				if !isVolumeUpload(c) {
					return errCSRF
				}
				c.Set(csrfPendingKey, want)
				return next(c)
			}
			got = c.FormValue(csrfField)
		}
		if !sameToken(got, want) {
			return errCSRF
		}
		return next(c)
	}
}

var errCSRF = gpuportal.Errorf(gpuportal.EFORBIDDEN, "The form has expired or did not come from this site. Please reload the page and try again.")

// csrfPendingKey holds, for a multipart form, the session's CSRF token
// that its first part must carry (checkFormCSRF).
const csrfPendingKey = "csrf_pending"

func sameToken(got, want string) bool {
	return want != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

func isMultipart(r *http.Request) bool {
	mediaType, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return strings.HasPrefix(mediaType, "multipart/")
}

// checkFormCSRF checks a multipart form whose CSRF token checkCSRF left
// to the handler: its first part must be the token field. Read at most a
// token's length: nothing of a file is read before the check.
func checkFormCSRF(c echo.Context, mr *multipart.Reader) error {
	want, pending := c.Get(csrfPendingKey).(string)
	if !pending {
		return nil // the header carried the token, already checked
	}
	part, err := mr.NextPart()
	if err != nil || part.FormName() != csrfField {
		return errCSRF
	}
	got, err := io.ReadAll(io.LimitReader(part, 256))
	if err != nil || !sameToken(string(got), want) {
		return errCSRF
	}
	return nil
}

// limitAnonymousUploads gives an upload route's body the ordinary limit
// until the request is known to come from a user: the global body limit
// lifts it for uploads (their files stream into volumes), and a body is
// only worth taking from someone signed in.
func limitAnonymousUploads(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if isVolumeUpload(c) && currentUser(c) == nil {
			r := c.Request()
			r.Body = http.MaxBytesReader(c.Response(), r.Body, maxFormBody)
		}
		return next(c)
	}
}

// maxFormBody is the body limit of every request but a signed-in user's
// upload (routes.go).
const maxFormBody = 2 << 20

// removeParsedForms removes the temporary files of any multipart form
// parsed while serving the request. net/http does this only for the
// request it handed out, and the middlewares work on copies of it.
func removeParsedForms(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		defer func() {
			if f := c.Request().MultipartForm; f != nil {
				_ = f.RemoveAll()
			}
		}()
		return next(c)
	}
}

// requireUser lets only logged-in users through.
func requireUser(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if currentUser(c) == nil {
			if !isAPI(c) && c.Request().Method == http.MethodGet {
				return c.Redirect(http.StatusSeeOther, "/login?next="+urlQueryEscape(c.Request().URL.RequestURI()))
			}
			return gpuportal.Errorf(gpuportal.EUNAUTHORIZED, "Please log in.")
		}
		return next(c)
	}
}

// requireAdmin lets only admins through (403 for customers).
func requireAdmin(next echo.HandlerFunc) echo.HandlerFunc {
	return requireUser(func(c echo.Context) error {
		if !currentUser(c).IsAdmin() {
			return gpuportal.Errorf(gpuportal.EFORBIDDEN, "This page is for administrators only.")
		}
		return next(c)
	})
}

// isHTTPS reports whether the request came over HTTPS: TLS here, or a
// trusted proxy's X-Forwarded-Proto (anyone else's is not believed).
func (s *Server) isHTTPS(c echo.Context) bool {
	return s.requestIsHTTPS(c.Request())
}

// requestIsHTTPS is isHTTPS for a plain request (the app proxy's).
func (s *Server) requestIsHTTPS(r *http.Request) bool {
	return r.TLS != nil || (s.fromTrustedProxy(r) && r.Header.Get("X-Forwarded-Proto") == "https")
}
