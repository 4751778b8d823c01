package web

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"gpuportal"
	"gpuportal/i18n"
	"gpuportal/store"
	"gpuportal/web/templates"
)

// Admins manage accounts: balances, credits, credit limits, quotas,
// disabling (DESIGN §6: /admin/users).

const usersPerPage = 25

func (s *Server) apiAdminUsers(c echo.Context) error {
	p, err := listParams(c)
	if err != nil {
		return err
	}
	tab, err := tabParam(c, "people", "teams")
	if err != nil {
		return err
	}
	list, err := s.db.AdminAccounts(c.Request().Context(), currentUser(c), c.QueryParam("q"), c.QueryParam("sort"), tab == "teams", p)
	if err != nil {
		return err
	}
	return withTotal(c, p, list)
}

func (s *Server) apiAdminCredit(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	var req gpuportal.CreditRequest
	if err := bindJSON(c, &req); err != nil {
		return err
	}
	b, err := s.db.Credit(c.Request().Context(), currentUser(c), id, req)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, b)
}

func (s *Server) apiUpdateAccount(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	var up store.AccountUpdate
	if err := bindJSON(c, &up); err != nil {
		return err
	}
	u, err := s.db.UpdateAccount(c.Request().Context(), currentUser(c), id, up)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, u)
}

func (s *Server) handleUsersPage(c echo.Context) error {
	page, _ := strconv.Atoi(c.QueryParam("page"))
	page = max(page, 1)
	search, sort := strings.TrimSpace(c.QueryParam("q")), c.QueryParam("sort")
	tab, err := tabParam(c, "people", "teams")
	if err != nil {
		return err
	}
	teams := tab == "teams"
	list, err := s.db.AdminAccounts(c.Request().Context(), currentUser(c), search, sort, teams, store.Page{Limit: usersPerPage + 1, Offset: (page - 1) * usersPerPage})
	if err != nil {
		return err
	}
	p := templates.UsersPage{Search: search, Sort: sort, Page: page, Teams: teams}
	if len(list) > usersPerPage {
		p.More, list = true, list[:usersPerPage]
	}
	p.Users = list
	return s.render(c, http.StatusOK, templates.Users(p))
}

// yuanField reads a form field in yuan (a leading minus takes money
// back) as fen.
func yuanField(c echo.Context, field string) (gpuportal.Fen, error) {
	v := strings.TrimSpace(c.FormValue(field))
	negative := strings.HasPrefix(v, "-")
	amount, err := gpuportal.ParseYuan(strings.TrimPrefix(v, "-"))
	if negative {
		amount = -amount
	}
	return amount, err
}

func (s *Server) handleCreditForm(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	amount, err := yuanField(c, "amount")
	if err != nil {
		return err
	}
	if _, err := s.db.Credit(c.Request().Context(), currentUser(c), id, gpuportal.CreditRequest{Amount: amount, Note: c.FormValue("note")}); err != nil {
		return err
	}
	s.addFlash(c, "success", i18n.T(reqOf(c).lang, "Credited %s to user %d.", amount.String(), id))
	return redirect(c, "/admin/users")
}

func (s *Server) handleAccountForm(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	limit, err := yuanField(c, "credit_limit")
	if err != nil {
		return err
	}
	var q gpuportal.Quotas
	for field, into := range map[string]*int{"max_running_gpus": &q.MaxRunningGPUs, "max_booked_gpu_hours": &q.MaxBookedGPUHours, "max_waitlist_entries": &q.MaxWaitlistEntries, "max_queued_tasks": &q.MaxQueuedTasks} {
		if *into, err = strconv.Atoi(strings.TrimSpace(c.FormValue(field))); err != nil {
			return gpuportal.FieldErrorf(gpuportal.EINVALID, "quotas", "Quotas are whole numbers, 0 or more.")
		}
	}
	if v := strings.TrimSpace(c.FormValue("max_volume_gib")); v != "" {
		gib, err := strconv.Atoi(v)
		if err != nil {
			return gpuportal.FieldErrorf(gpuportal.EINVALID, "quotas", "Quotas are whole numbers, 0 or more.")
		}
		q.MaxVolumeGiB = &gib
	}
	disabled := c.FormValue("disabled") == "true"
	u, err := s.db.UpdateAccount(c.Request().Context(), currentUser(c), id, store.AccountUpdate{CreditLimit: &limit, Quotas: &q, Disabled: &disabled})
	if err != nil {
		return err
	}
	s.addFlash(c, "success", i18n.T(reqOf(c).lang, "Saved the limits of %s.", u.User.Email))
	return redirect(c, "/admin/users?q="+url.QueryEscape(u.User.Email))
}
