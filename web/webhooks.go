package web

import (
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"gpuportal"
	"gpuportal/i18n"
	"gpuportal/web/templates"
	"gpuportal/webhooks"
)

// Webhooks: the API (/api/v1/webhooks…) and the /webhooks page, one
// store for both. With X-Team (or the switcher) they are the team's.

// newWebhook checks a new webhook (its form, then where its host points)
// and makes it.
func (s *Server) newWebhook(c echo.Context, url string, events []string) (*gpuportal.Webhook, error) {
	if err := gpuportal.ValidateWebhook(url, events); err != nil {
		return nil, err
	}
	if err := webhooks.CheckURL(c.Request().Context(), s.cfg.Resolver, url, s.cfg.WebhookAllowPrivate); err != nil {
		return nil, err
	}
	return s.db.CreateWebhook(c.Request().Context(), currentUser(c), url, events)
}

func (s *Server) apiCreateWebhook(c echo.Context) error {
	var in struct {
		URL    string   `json:"url"`
		Events []string `json:"events"`
	}
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	w, err := s.newWebhook(c, in.URL, in.Events)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, w)
}

func (s *Server) apiWebhooks(c echo.Context) error {
	list, err := s.db.Webhooks(c.Request().Context(), currentUser(c))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, list)
}

func (s *Server) apiWebhook(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	w, err := s.db.Webhook(c.Request().Context(), currentUser(c), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, w)
}

func (s *Server) apiDeleteWebhook(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	if err := s.db.DeleteWebhook(c.Request().Context(), currentUser(c), id); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func (s *Server) apiRollWebhookSecret(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	w, err := s.db.RollWebhookSecret(c.Request().Context(), currentUser(c), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, w)
}

func (s *Server) apiWebhookDeliveries(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	p, err := listParams(c)
	if err != nil {
		return err
	}
	list, err := s.db.WebhookDeliveries(c.Request().Context(), currentUser(c), id, p)
	if err != nil {
		return err
	}
	return withTotal(c, p, list)
}

func deliveryParam(c echo.Context) (int64, error) {
	id, err := strconv.ParseInt(c.Param("delivery_id"), 10, 64)
	if err != nil || id <= 0 {
		return 0, gpuportal.Errorf(gpuportal.ENOTFOUND, "Not found.")
	}
	return id, nil
}

func (s *Server) apiRedeliver(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	delivery, err := deliveryParam(c)
	if err != nil {
		return err
	}
	d, err := s.db.Redeliver(c.Request().Context(), currentUser(c), id, delivery)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusAccepted, d)
}

func (s *Server) apiTestWebhook(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	d, err := s.db.TestWebhook(c.Request().Context(), currentUser(c), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusAccepted, d)
}

// The page.

func (s *Server) handleWebhooksPage(c echo.Context) error {
	return s.renderWebhooks(c, http.StatusOK, templates.WebhooksPage{})
}

func (s *Server) renderWebhooks(c echo.Context, status int, p templates.WebhooksPage) error {
	list, err := s.db.Webhooks(c.Request().Context(), currentUser(c))
	if err != nil {
		return err
	}
	p.Webhooks = list
	p.Events = gpuportal.WebhookEvents
	p.TeamName = teamNameOf(c)
	return s.render(c, status, templates.Webhooks(p))
}

// teamNameOf is the team the request acts for ("" for one's own account).
func teamNameOf(c echo.Context) string {
	if u := currentUser(c); u != nil && u.Acting != nil {
		return u.Acting.TeamName
	}
	return ""
}

func (s *Server) handleCreateWebhookForm(c echo.Context) error {
	if err := c.Request().ParseForm(); err != nil {
		return gpuportal.Errorf(gpuportal.EINVALID, "The form could not be read.")
	}
	url, events := c.FormValue("url"), c.Request().Form["events"]
	w, err := s.newWebhook(c, url, events)
	if err != nil {
		code := gpuportal.ErrorCode(err)
		if code == gpuportal.EINTERNAL {
			return err
		}
		return s.renderWebhooks(c, statusOf[code], templates.WebhooksPage{
			Errors: templates.FieldErrors{gpuportal.ErrorField(err): i18n.Error(reqOf(c).lang, err)}, TypedURL: url, TypedEvents: events})
	}
	// The secret is rendered directly, never through a cookie's flash.
	return s.renderWebhooks(c, http.StatusCreated, templates.WebhooksPage{NewSecret: w.Secret, NewSecretFor: w.ID})
}

func (s *Server) handleRollWebhookSecretForm(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	w, err := s.db.RollWebhookSecret(c.Request().Context(), currentUser(c), id)
	if err != nil {
		return err
	}
	return s.renderWebhooks(c, http.StatusOK, templates.WebhooksPage{NewSecret: w.Secret, NewSecretFor: w.ID})
}

func (s *Server) handleDeleteWebhookForm(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	if err := s.db.DeleteWebhook(c.Request().Context(), currentUser(c), id); err != nil {
		return err
	}
	s.addFlash(c, "info", i18n.T(reqOf(c).lang, "Webhook deleted; nothing more is sent to it."))
	return redirect(c, "/webhooks")
}

func (s *Server) handleTestWebhookForm(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	if _, err := s.db.TestWebhook(c.Request().Context(), currentUser(c), id); err != nil {
		return err
	}
	s.addFlash(c, "success", i18n.T(reqOf(c).lang, "A test event is on its way; its delivery shows below within seconds."))
	return redirect(c, "/webhooks#webhook-"+strconv.FormatInt(id, 10))
}

func (s *Server) handleRedeliverForm(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	delivery, err := deliveryParam(c)
	if err != nil {
		return err
	}
	if _, err := s.db.Redeliver(c.Request().Context(), currentUser(c), id, delivery); err != nil {
		return err
	}
	s.addFlash(c, "success", i18n.T(reqOf(c).lang, "The event is sent again."))
	return redirect(c, "/webhooks#webhook-"+strconv.FormatInt(id, 10))
}
