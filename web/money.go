package web

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"gpuportal"
	"gpuportal/i18n"
	"gpuportal/store"
	"gpuportal/web/templates"
)

// Money: the balance, top-ups through a payment provider (the built-in
// test provider is a page of this portal that calls the same webhook code
// with the same signature), the ledger page with its monthly statements.

func (s *Server) apiBalance(c echo.Context) error {
	b, err := s.db.Balance(c.Request().Context(), currentUser(c))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, b)
}

func (s *Server) apiCreateTopUp(c echo.Context) error {
	var req gpuportal.TopUpRequest
	if err := bindJSON(c, &req); err != nil {
		return err
	}
	t, err := s.createTopUp(c, req, "")
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, t)
}

// createTopUp starts a top-up; the payer comes back to back (a path on
// this site) once paid, or to the ledger when back is "".
func (s *Server) createTopUp(c echo.Context, req gpuportal.TopUpRequest, back string) (*gpuportal.TopUp, error) {
	if !s.topUpsEnabled() {
		return nil, gpuportal.Errorf(gpuportal.ECONFLICT, "Top-ups are not set up on this portal; ask an administrator to credit your account.")
	}
	if req.Provider == "" {
		return nil, gpuportal.FieldErrorf(gpuportal.EINVALID, "provider", "Say which payment provider to pay through (this portal takes %q).", s.defaultProvider())
	}
	p, err := s.provider(req.Provider)
	if err != nil {
		return nil, gpuportal.FieldErrorf(gpuportal.EINVALID, "provider", "Unknown payment provider %q (this portal takes %q).", req.Provider, s.defaultProvider())
	}
	ctx := c.Request().Context()
	t, err := s.db.CreateTopUp(ctx, currentUser(c), req)
	if err != nil {
		return nil, err
	}
	if back == "" {
		back = "/ledger?topup=" + strconv.FormatInt(t.ID, 10)
	}
	payURL, ref, err := p.Checkout(ctx, *t, s.absoluteURL(back))
	if err != nil {
		return nil, err // the pending top-up lapses by itself
	}
	if err := s.db.SetTopUpCheckout(ctx, t.ID, ref, payURL); err != nil {
		return nil, err
	}
	t.ProviderRef, t.PayURL = ref, s.linkURL(payURL)
	return t, nil
}

// linkURL is a link the portal hands out: absolute, so a script can
// open it (a provider's own checkout address is absolute already).
func (s *Server) linkURL(link string) string {
	if strings.HasPrefix(link, "/") {
		return s.absoluteURL(link)
	}
	return link
}

// absoluteURL is path on the portal's public address (where a provider
// sends the payer back).
func (s *Server) absoluteURL(path string) string {
	return strings.TrimRight(s.cfg.PublicURL, "/") + path
}

func (s *Server) apiTopUps(c echo.Context) error {
	p, err := listParams(c)
	if err != nil {
		return err
	}
	list, err := s.db.TopUpPage(c.Request().Context(), currentUser(c), p)
	if err != nil {
		return err
	}
	for k := range list {
		s.withCheckout(&list[k])
	}
	return withTotal(c, p, list)
}

// apiPaymentWebhook is where a payment provider says a top-up is paid.
// Only a body signed with PORTAL_PAYMENT_SECRET credits anything.
func (s *Server) apiPaymentWebhook(c echo.Context) error {
	body, err := io.ReadAll(io.LimitReader(c.Request().Body, 64<<10))
	if err != nil {
		return gpuportal.Errorf(gpuportal.EINVALID, "The request body could not be read.")
	}
	credited, err := s.receivePayment(c, c.Param("provider"), body, c.Request().Header)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]bool{"credited": credited})
}

// receivePayment checks a webhook's signature and applies its event.
func (s *Server) receivePayment(c echo.Context, name string, body []byte, header http.Header) (bool, error) {
	p, err := s.provider(name)
	if err != nil {
		return false, err
	}
	ev, err := p.Event(body, header)
	if err != nil {
		return false, err
	}
	ctx := c.Request().Context()
	for _, u := range ev.Refunds {
		// A refund of another portal's, or one this portal never asked
		// for, names no part here: nothing to keep.
		if err := s.db.SettleRefundPart(ctx, u); err != nil && gpuportal.ErrorCode(err) != gpuportal.ENOTFOUND {
			return false, err
		}
	}
	if ev.Payment == nil {
		return false, nil
	}
	return s.db.ApplyPayment(ctx, p.Name(), *ev.Payment)
}

// handleTestPayPage is the built-in test provider's checkout page.
func (s *Server) handleTestPayPage(c echo.Context) error {
	t, err := s.topUpOf(c)
	if err != nil {
		return err
	}
	return s.render(c, http.StatusOK, templates.PayPage(templates.PayView{TopUp: *t, Action: c.Request().URL.RequestURI()}))
}

// handleTestPayConfirm is the payer confirming on the test provider's
// page: it sends the provider's signed webhook through the same code a
// real provider's call takes.
func (s *Server) handleTestPayConfirm(c echo.Context) error {
	t, err := s.topUpOf(c)
	if err != nil {
		return err
	}
	body, _ := json.Marshal(gpuportal.PaymentEvent{PaymentID: fmt.Sprintf("test-%d-%d", t.ID, t.CreatedAt.Unix()), TopUpID: t.ID, Amount: t.Amount, Status: "paid"})
	header := http.Header{"X-Signature": {testProvider{secret: s.cfg.PaymentSecret}.sign(body)}}
	if _, err := s.receivePayment(c, gpuportal.TestPayProvider, body, header); err != nil {
		return err
	}
	s.addFlash(c, "success", i18n.T(reqOf(c).lang, "Top-up of %s received.", t.Amount.String()))
	return redirect(c, s.payerBack(c.QueryParam("back")))
}

// payerBack is where the test provider sends the payer once paid: back,
// an address on this portal, as a path (anything else: the ledger).
func (s *Server) payerBack(back string) string {
	path, ok := strings.CutPrefix(back, strings.TrimRight(s.cfg.PublicURL, "/"))
	if !ok {
		return "/ledger"
	}
	return safeNext(path, "/ledger")
}

// topUpOf is the top-up on the test provider's checkout page: the payer's
// own only — an administrator pays nobody's (they credit, audited).
func (s *Server) topUpOf(c echo.Context) (*gpuportal.TopUp, error) {
	if c.Param("provider") != gpuportal.TestPayProvider || !s.cfg.TestPayments {
		return nil, echo.ErrNotFound
	}
	id, err := pathID(c)
	if err != nil {
		return nil, err
	}
	user := currentUser(c)
	t, err := s.db.TopUp(c.Request().Context(), user, id)
	if err != nil {
		return nil, err
	}
	if t.UserID != user.ID {
		return nil, gpuportal.Errorf(gpuportal.ENOTFOUND, "Top-up %d not found.", id)
	}
	s.withCheckout(t)
	return t, nil
}

// handleTopUpForm starts a top-up from the ledger page and goes to the
// provider's page; once paid, the payer is back where they came from
// (next: the quote or the waitlist offer that needed the money).
func (s *Server) handleTopUpForm(c echo.Context) error {
	next := safeNext(c.FormValue("next"), "")
	amount, err := gpuportal.ParseYuan(c.FormValue("amount"))
	var t *gpuportal.TopUp
	if err == nil {
		t, err = s.createTopUp(c, gpuportal.TopUpRequest{Amount: amount, Provider: s.defaultProvider()}, next)
	}
	if err != nil {
		// Said on the form, with what was typed, never a page of its own.
		v, perr := s.ledgerPage(c)
		if perr != nil {
			return perr
		}
		v.TopUpTyped, v.TopUpNext = c.FormValue("amount"), next
		var fields templates.FieldErrors
		status, internal := formError(c, err, &fields, &v.TopUpError)
		if internal != nil {
			return internal
		}
		if v.TopUpError == "" {
			v.TopUpError = fields[gpuportal.ErrorField(err)]
		}
		return s.render(c, status, templates.Ledger(v))
	}
	return redirect(c, t.PayURL)
}

// statementMonth reads ?month=YYYY-MM (default: this month, site time).
func (s *Server) statementMonth(c echo.Context) (time.Time, error) {
	now := s.cfg.Clock.Now().In(s.cfg.Location)
	first := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, s.cfg.Location)
	if v := c.QueryParam("month"); v != "" {
		t, err := time.ParseInLocation("2006-01", v, s.cfg.Location)
		if err != nil || t.Year() < 2000 || t.After(first.AddDate(1, 0, 0)) {
			return time.Time{}, gpuportal.FieldErrorf(gpuportal.EINVALID, "month", "The month must look like 2026-12.")
		}
		first = t
	}
	return first, nil
}

var ledgerKinds = []string{gpuportal.LedgerReservation, gpuportal.LedgerRefund, gpuportal.LedgerCancellationFee, gpuportal.LedgerInstance, gpuportal.LedgerTopUp, gpuportal.LedgerCredit, gpuportal.LedgerPayout, gpuportal.LedgerVolume, gpuportal.LedgerDisk, gpuportal.LedgerImage, gpuportal.LedgerTransfer}

func ledgerKindParam(c echo.Context) (string, error) {
	k := c.QueryParam("kind")
	if k == "" {
		return "", nil
	}
	for _, known := range ledgerKinds {
		if k == known {
			return k, nil
		}
	}
	return "", gpuportal.FieldErrorf(gpuportal.EINVALID, "kind", "Unknown ledger kind %q.", k)
}

const ledgerPageSize = 100

func (s *Server) handleLedgerPage(c echo.Context) error {
	v, err := s.ledgerPage(c)
	if err != nil {
		return err
	}
	return s.render(c, http.StatusOK, templates.Ledger(v))
}

// ledgerPage is what the ledger page shows for the request's month, kind
// and page.
func (s *Server) ledgerPage(c echo.Context) (templates.LedgerPage, error) {
	ctx := c.Request().Context()
	month, err := s.statementMonth(c)
	if err != nil {
		return templates.LedgerPage{}, err
	}
	kind, err := ledgerKindParam(c)
	if err != nil {
		return templates.LedgerPage{}, err
	}
	page, _ := strconv.Atoi(c.QueryParam("page"))
	page = max(page, 1)
	entries, err := s.db.LedgerPage(ctx, currentUser(c).ID, store.LedgerFilter{From: month, To: month.AddDate(0, 1, 0), Kind: kind, Limit: ledgerPageSize + 1, Offset: (page - 1) * ledgerPageSize})
	if err != nil {
		return templates.LedgerPage{}, err
	}
	v := templates.LedgerPage{Month: month, Kind: kind, Kinds: ledgerKinds, Page: page, TopUps: s.topUpsEnabled(),
		TopUpAmount: gpuportal.Fen(50_000), TopUpNext: safeNext(c.QueryParam("next"), "")}
	// "Top up" from a quote or an offer names what is missing (a link
	// others may have edited: an amount out of range is the default).
	if a, err := gpuportal.ParseYuan(c.QueryParam("amount")); err == nil && a >= gpuportal.MinTopUp && a <= gpuportal.MaxTopUp {
		v.TopUpAmount = a
	}
	if len(entries) > ledgerPageSize {
		v.More, entries = true, entries[:ledgerPageSize]
	}
	v.Entries = entries
	if v.Balance, err = s.db.Balance(ctx, currentUser(c)); err != nil {
		return v, err
	}
	if v.Spend, err = s.db.SpendByKind(ctx, currentUser(c).ID, month, month.AddDate(0, 1, 0)); err != nil {
		return v, err
	}
	if v.Refunds, err = s.ledgerRefunds(c); err != nil {
		return v, err
	}
	v.Refundable = v.Balance.Balance-v.Balance.Held > 0
	if v.Days, err = s.spendDays(c, spendDaysDefault); err != nil {
		return v, err
	}
	if v.Budget, err = s.db.Budget(ctx, currentUser(c).ID); err != nil {
		return v, err
	}
	return v, nil
}

// handleStatementCSV downloads a month of the ledger as CSV: UTF-8 with a
// byte-order mark, so that Excel opens Chinese text correctly.
func (s *Server) handleStatementCSV(c echo.Context) error {
	month, err := s.statementMonth(c)
	if err != nil {
		return err
	}
	kind, err := ledgerKindParam(c)
	if err != nil {
		return err
	}
	entries, err := s.db.LedgerPage(c.Request().Context(), currentUser(c).ID, store.LedgerFilter{From: month, To: month.AddDate(0, 1, 0), Kind: kind, Limit: 1_000_000})
	if err != nil {
		return err
	}
	lang := reqOf(c).lang
	var buf bytes.Buffer
	buf.WriteString("\ufeff")
	w := csv.NewWriter(&buf)
	w.UseCRLF = true
	_ = w.Write([]string{i18n.T(lang, "Date"), i18n.T(lang, "Kind"), i18n.T(lang, "Description"), i18n.T(lang, "Amount (¥)"), i18n.T(lang, "Reference")})
	for k := len(entries) - 1; k >= 0; k-- { // oldest first, as statements read
		e := entries[k]
		_ = w.Write([]string{e.At.In(s.cfg.Location).Format("2006-01-02 15:04"), i18n.T(lang, templates.LedgerKindLabel(e.Kind)),
			templates.LedgerTitle(lang, e), yuan(-e.Amount), templates.LedgerReference(e)})
	}
	w.Flush()
	c.Response().Header().Set(echo.HeaderContentDisposition, fmt.Sprintf(`attachment; filename="gpuportal-statement-%s.csv"`, month.Format("2006-01")))
	return c.Blob(http.StatusOK, "text/csv; charset=utf-8", buf.Bytes())
}

// yuan writes fen as a plain decimal for spreadsheets: -1234.50.
func yuan(f gpuportal.Fen) string {
	sign := ""
	if f < 0 {
		sign, f = "-", -f
	}
	return fmt.Sprintf("%s%d.%02d", sign, f/100, f%100)
}

func (s *Server) apiLedger(c echo.Context) error {
	p, err := listParams(c)
	if err != nil {
		return err
	}
	f := store.LedgerFilter{Limit: p.Limit, Offset: p.Offset, Total: p.Total}
	if c.QueryParam("month") != "" {
		month, err := s.statementMonth(c)
		if err != nil {
			return err
		}
		f.From, f.To = month, month.AddDate(0, 1, 0)
	}
	if f.Kind, err = ledgerKindParam(c); err != nil {
		return err
	}
	entries, err := s.db.LedgerPage(c.Request().Context(), currentUser(c).ID, f)
	if err != nil {
		return err
	}
	return withTotal(c, p, entries)
}
