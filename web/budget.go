package web

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"gpuportal"
	"gpuportal/i18n"
	"gpuportal/web/templates"
)

// Money over time: what a customer spent per day and a monthly budget
// they set, told at 80 % and 100 % (the planner's budgets, plan/books.go).

// spendDaysDefault and spendDaysMax bound GET /spend?days=.
const (
	spendDaysDefault = 30
	spendDaysMax     = 366
)

// spendJSON is GET /spend: each of the last days (today last) and the
// month's budget.
type spendJSON struct {
	Days   []gpuportal.DaySpend `json:"days"`
	Budget gpuportal.Budget     `json:"budget"`
}

// spendDays is the last n days' spend, today included (site time).
func (s *Server) spendDays(c echo.Context, n int) ([]gpuportal.DaySpend, error) {
	now := s.cfg.Clock.Now().In(s.cfg.Location)
	today := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, s.cfg.Location)
	return s.db.SpendByDay(c.Request().Context(), currentUser(c).ID, today.AddDate(0, 0, 1-n), today.AddDate(0, 0, 1))
}

func (s *Server) apiSpend(c echo.Context) error {
	n := spendDaysDefault
	if v := c.QueryParam("days"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 || n > spendDaysMax {
			return gpuportal.FieldErrorf(gpuportal.EINVALID, "days", "days must be a number from 1 to %d.", spendDaysMax)
		}
	}
	days, err := s.spendDays(c, n)
	if err != nil {
		return err
	}
	b, err := s.db.Budget(c.Request().Context(), currentUser(c).ID)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, spendJSON{Days: days, Budget: b})
}

type budgetJSON struct {
	Monthly *gpuportal.Fen `json:"monthly_budget_fen"` // required: 0 says "none"
}

func (s *Server) apiSetBudget(c echo.Context) error {
	var in budgetJSON
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	if in.Monthly == nil {
		return gpuportal.FieldErrorf(gpuportal.EINVALID, "monthly_budget_fen", "Say the monthly budget in fen (0 for none).")
	}
	b, err := s.db.SetBudget(c.Request().Context(), currentUser(c), *in.Monthly)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, b)
}

// handleBudgetForm sets the budget from the ledger page (yuan; empty or
// 0: none).
func (s *Server) handleBudgetForm(c echo.Context) error {
	var monthly gpuportal.Fen
	var err error
	if v := strings.TrimSpace(c.FormValue("budget")); v != "" {
		monthly, err = gpuportal.ParseYuan(v)
	}
	if err == nil {
		_, err = s.db.SetBudget(c.Request().Context(), currentUser(c), monthly)
	}
	if err != nil {
		if gpuportal.ErrorCode(err) == gpuportal.EINTERNAL {
			return err
		}
		v, perr := s.ledgerPage(c)
		if perr != nil {
			return perr
		}
		v.BudgetTyped, v.BudgetError = c.FormValue("budget"), i18n.Error(reqOf(c).lang, err)
		return s.render(c, statusOf[gpuportal.ErrorCode(err)], templates.Ledger(v))
	}
	if monthly == 0 {
		s.addFlash(c, "info", i18n.T(reqOf(c).lang, "No monthly budget: you are not told about your spend."))
	} else {
		s.addFlash(c, "success", i18n.T(reqOf(c).lang, "Monthly budget set to %s: you are told at 80 %% and 100 %% of it.", monthly.String()))
	}
	return redirect(c, "/ledger")
}
