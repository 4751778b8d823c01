package web

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"

	"gpuportal"
	"gpuportal/i18n"
	"gpuportal/web/templates"
)

// --- sign up ---

func (s *Server) handleSignupPage(c echo.Context) error {
	if currentUser(c) != nil {
		return redirect(c, "/")
	}
	return s.render(c, http.StatusOK, templates.SignupPage(templates.AuthForm{Next: safeNext(c.QueryParam("next"), ""), EmailOn: s.db.Channels[gpuportal.ChannelEmail]}))
}

func (s *Server) handleSignupForm(c echo.Context) error {
	in := gpuportal.SignUp{Email: c.FormValue("email"), Password: c.FormValue("password"), Name: c.FormValue("name"), Phone: c.FormValue("phone")}
	u, err := s.signUp(c, in)
	if err != nil {
		return s.renderFormError(c, err, func(f templates.AuthForm) templates.AuthForm {
			f.Email, f.Name, f.Phone, f.Next = in.Email, in.Name, in.Phone, safeNext(c.FormValue("next"), "")
			f.EmailOn = s.db.Channels[gpuportal.ChannelEmail]
			return f
		}, templates.SignupPage)
	}
	s.logIn(c, u)
	s.addFlash(c, "success", i18n.T(reqOf(c).lang, "Welcome to gpuportal, %s! Your account is ready.", u.Name))
	return redirect(c, safeNext(c.FormValue("next"), "/"))
}

func (s *Server) apiSignup(c echo.Context) error {
	var in gpuportal.SignUp
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	u, err := s.signUp(c, in)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, map[string]any{"user": u})
}

// signUp creates a customer account, at most signupsPerIP an hour from
// one address (the page and the API count together).
func (s *Server) signUp(c echo.Context, in gpuportal.SignUp) (*gpuportal.User, error) {
	if wait, blocked := s.limiter.attempt(signupRule(c.RealIP())); blocked {
		return nil, gpuportal.Errorf(gpuportal.ERATELIMITED, "Too many sign-ups from your address. Please try again in %d minutes.", minutesLeft(wait))
	}
	return s.db.CreateUser(c.Request().Context(), in, gpuportal.RoleCustomer, reqOf(c).lang)
}

// renderFormError shows a form again with the error next to its field (or
// above the form), with the status the JSON API would give.
func (s *Server) renderFormError(c echo.Context, err error, fill func(templates.AuthForm) templates.AuthForm, page func(templates.AuthForm) templ.Component) error {
	code := gpuportal.ErrorCode(err)
	if code == gpuportal.EINTERNAL {
		return err
	}
	f := templates.AuthForm{Errors: templates.FieldErrors{}}
	lang := reqOf(c).lang
	var all gpuportal.ValidationErrors
	if errors.As(err, &all) { // every field at fault, each by its field
		for _, e := range all {
			f.Errors[e.Field] = i18n.Error(lang, e)
		}
	} else if field := gpuportal.ErrorField(err); field != "" {
		f.Errors[field] = i18n.Error(lang, err)
	} else {
		f.Error = i18n.Error(lang, err)
	}
	return s.render(c, statusOf[code], page(fill(f)))
}

// --- log in / log out ---

func (s *Server) handleLoginPage(c echo.Context) error {
	next := safeNext(c.QueryParam("next"), "/")
	if currentUser(c) != nil {
		return redirect(c, next)
	}
	return s.render(c, http.StatusOK, templates.LoginPage(templates.AuthForm{Next: next}))
}

func (s *Server) handleLoginForm(c echo.Context) error {
	email := gpuportal.NormalizeEmail(c.FormValue("email"))
	next := safeNext(c.FormValue("next"), "/")
	u, err := s.checkLogin(c, email, c.FormValue("password"))
	if err != nil {
		return s.renderFormError(c, err, func(f templates.AuthForm) templates.AuthForm {
			f.Email, f.Next = email, next
			return f
		}, templates.LoginPage)
	}
	s.logIn(c, u)
	if next == "/" && u.IsAdmin() {
		next = "/admin" // an operator's home is the overview
	}
	return redirect(c, next)
}

// checkLogin checks a password under the login rate limits.
func (s *Server) checkLogin(c echo.Context, email, password string) (*gpuportal.User, error) {
	ip := c.RealIP()
	if err := s.limiter.checkLoginAllowed(ip, email); err != nil {
		return nil, err
	}
	u, err := s.db.Authenticate(c.Request().Context(), email, password)
	if gpuportal.ErrorCode(err) == gpuportal.EUNAUTHORIZED {
		s.limiter.loginFailed(ip, email)
		s.log.Info("login failed", "email", email, "ip", ip)
	} else if err == nil {
		s.limiter.loginSucceeded(ip, email)
	}
	return u, err
}

func (s *Server) handleLogout(c echo.Context) error {
	if err := s.logOut(c); err != nil {
		return err
	}
	s.addFlash(c, "info", i18n.T(reqOf(c).lang, "You have been logged out."))
	return redirect(c, "/")
}

// --- language ---

func (s *Server) handleSetLang(c echo.Context) error {
	lang := c.FormValue("lang")
	if !gpuportal.ValidLang(lang) {
		return gpuportal.FieldErrorf(gpuportal.EINVALID, "lang", "Unknown language %q.", lang)
	}
	r := reqOf(c)
	if r.user != nil {
		if err := s.db.SetUserLang(c.Request().Context(), r.user.ID, lang); err != nil {
			return err
		}
	}
	if r.session != nil {
		r.session.Values["lang"] = lang
		r.dirty = true
	}
	return redirect(c, safeNext(c.FormValue("next"), "/"))
}

// --- API tokens ---

type tokenRequest struct {
	Email    string `json:"email"`
	Password string `json:"password"`
	Name     string `json:"name"`
	// TeamID: a token that acts for this team only; Scope: write (the
	// default) or read.
	TeamID *int64 `json:"team_id"`
	Scope  string `json:"scope"`
}

type tokenResponse struct {
	Token string              `json:"token"`
	Info  *gpuportal.APIToken `json:"info"`
}

// apiCreateToken trades an email and password for a new API token. The
// password is needed even by a caller already signed in (a browser
// session, or another token: a token must not mint more tokens); the
// email may then be left out.
func (s *Server) apiCreateToken(c echo.Context) error {
	var in tokenRequest
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	if err := s.tokenCreationAllowed(c); err != nil {
		return err
	}
	email := gpuportal.NormalizeEmail(in.Email)
	if u := currentUser(c); email == "" && u != nil {
		email = u.Email
	}
	if in.Password == "" {
		return gpuportal.FieldErrorf(gpuportal.EINVALID, "password", "Creating a token needs the account's password.")
	}
	u, err := s.checkLogin(c, email, in.Password)
	if err != nil {
		return err
	}
	var team int64
	if in.TeamID != nil {
		team = *in.TeamID
	}
	t, secret, err := s.db.CreateScopedToken(c.Request().Context(), u.ID, in.Name, team, in.Scope)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, tokenResponse{Token: secret, Info: t})
}

// tokenCreationAllowed counts a token creation (API or settings page)
// against its address's limit.
func (s *Server) tokenCreationAllowed(c echo.Context) error {
	if wait, blocked := s.limiter.attempt(tokenRule(c.RealIP())); blocked {
		return gpuportal.Errorf(gpuportal.ERATELIMITED, "Too many API tokens created from your address. Please try again in %d minutes.", minutesLeft(wait))
	}
	return nil
}

func (s *Server) apiListTokens(c echo.Context) error {
	tokens, err := s.db.APITokens(c.Request().Context(), currentUser(c).ID)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, tokens)
}

func (s *Server) apiRevokeToken(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	if err := s.db.RevokeAPIToken(c.Request().Context(), currentUser(c).ID, id); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func (s *Server) apiMe(c echo.Context) error {
	return c.JSON(http.StatusOK, currentUser(c))
}

// pathID parses the :id path parameter; a malformed id is not_found (it
// names nothing), never a 500.
func pathID(c echo.Context) (int64, error) {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil || id <= 0 {
		return 0, gpuportal.Errorf(gpuportal.ENOTFOUND, "Not found.")
	}
	return id, nil
}
