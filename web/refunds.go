package web

import (
	"context"
	"errors"
	"net/http"

	"time"

	"github.com/labstack/echo/v4"

	"gpuportal"
	"gpuportal/i18n"
	"gpuportal/store"
	"gpuportal/web/templates"
)

// Reconciliation and refunds: the two ways money moves between a
// provider and the ledger besides the webhook.

// reconcileAfter is how old a pending top-up is before reconciliation
// asks its provider about it (a webhook normally comes within seconds).
const reconcileAfter = 5 * time.Minute

// ReconcilePayments asks the providers about top-ups of the last day that
// are still unpaid a few minutes on — a webhook can be lost — and credits
// those that were paid (once, like the webhook) and ends those that never
// will be. It returns how many it credited.
func (s *Server) ReconcilePayments(ctx context.Context) (int, error) {
	if s.stripe == nil {
		return 0, nil
	}
	now := s.cfg.Clock.Now()
	list, err := s.db.UnconfirmedTopUps(ctx, s.stripe.Name(), now.Add(-24*time.Hour), now.Add(-reconcileAfter))
	if err != nil {
		return 0, err
	}
	credited := 0
	for _, t := range list {
		ev, expired, err := s.stripe.Lookup(ctx, t)
		switch {
		case err != nil:
			s.log.Warn("reconcile top-up: the provider cannot say", "topup", t.ID, "err", err)
		case ev != nil:
			ok, err := s.db.ApplyPayment(ctx, s.stripe.Name(), *ev)
			if err != nil {
				s.log.Error("reconcile top-up", "topup", t.ID, "err", err)
			} else if ok {
				credited++
				s.log.Info("top-up credited by reconciliation (its webhook was lost)", "topup", t.ID, "payment", ev.PaymentID)
			}
		case expired:
			if err := s.db.ExpireTopUp(ctx, t.ID); err != nil {
				return credited, err
			}
		}
	}
	return credited, nil
}

type refundRequestJSON struct {
	Amount gpuportal.Fen `json:"amount_fen"`
	Note   string        `json:"note"`
}

func (s *Server) apiRequestRefund(c echo.Context) error {
	var in refundRequestJSON
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	r, err := s.db.RequestRefund(c.Request().Context(), currentUser(c), in.Amount, in.Note)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, r)
}

func (s *Server) apiRefundRequests(c echo.Context) error {
	p, err := listParams(c)
	if err != nil {
		return err
	}
	list, err := s.db.RefundRequests(c.Request().Context(), currentUser(c), false, "", p)
	if err != nil {
		return err
	}
	return withTotal(c, p, list)
}

func refundStatusParam(c echo.Context) (string, error) {
	switch v := c.QueryParam("status"); v {
	case "", gpuportal.RefundRequested, gpuportal.RefundRefunding, gpuportal.RefundRefunded, gpuportal.RefundRejected, gpuportal.RefundFailed:
		return v, nil
	default:
		return "", gpuportal.FieldErrorf(gpuportal.EINVALID, "status", "Unknown status %q.", v)
	}
}

func (s *Server) apiAdminRefundRequests(c echo.Context) error {
	status, err := refundStatusParam(c)
	if err != nil {
		return err
	}
	p, err := listParams(c)
	if err != nil {
		return err
	}
	list, err := s.db.RefundRequests(c.Request().Context(), currentUser(c), true, status, p)
	if err != nil {
		return err
	}
	return withTotal(c, p, list)
}

// approveRefund pays a request back: the payout is taken from the balance,
// each share refunded through the provider of the payment it came from, a
// share a provider refuses put back.
func (s *Server) approveRefund(c echo.Context) (*gpuportal.RefundRequest, error) {
	id, err := pathID(c)
	if err != nil {
		return nil, err
	}
	ctx := c.Request().Context()
	_, parts, err := s.db.StartRefund(ctx, currentUser(c), id)
	if err != nil {
		return nil, err
	}
	// The payout is in the ledger already: its outcome must be kept even
	// if the admin's browser goes away.
	ctx = context.WithoutCancel(ctx)
	for _, part := range parts {
		if err := s.askRefund(ctx, part); err != nil {
			return nil, err
		}
	}
	return s.db.RefundRequest(ctx, currentUser(c), id)
}

// askRefund asks a part's provider to make its refund and keeps the
// answer: made, refused (the money back in the balance), or — a timeout,
// a 5xx, no provider here now — unknown: the part stays pending and
// RetryRefunds asks again with the same idempotency key. Never taken as a
// refusal: the provider may have made the refund.
func (s *Server) askRefund(ctx context.Context, part gpuportal.RefundPart) error {
	p, err := s.provider(part.Provider)
	if err != nil {
		return s.db.RefundPartUnknown(ctx, part.RefundID, part.TopUpID, err.Error())
	}
	ref, err := p.Refund(ctx, part)
	var refused refundRefused
	switch {
	case err == nil:
		return s.db.SettleRefundPart(ctx, gpuportal.RefundUpdate{RefundID: part.RefundID, TopUpID: part.TopUpID, Ref: ref, Status: gpuportal.RefundPartMade})
	case errors.As(err, &refused):
		s.log.Warn("refund refused", "refund", part.RefundID, "topup", part.TopUpID, "err", err)
		return s.db.SettleRefundPart(ctx, gpuportal.RefundUpdate{RefundID: part.RefundID, TopUpID: part.TopUpID, Status: gpuportal.RefundPartRefused, Error: err.Error()})
	default:
		s.log.Warn("refund outcome unknown; it is asked again", "refund", part.RefundID, "topup", part.TopUpID, "err", err)
		return s.db.RefundPartUnknown(ctx, part.RefundID, part.TopUpID, "outcome unknown, asked again: "+err.Error())
	}
}

// refundRetryAfter is how long a pending part waits (since it was last
// asked) before RetryRefunds takes it up: the approval asking it now is
// not raced.
const refundRetryAfter = time.Minute

// RetryRefunds settles the refund parts whose outcome is not known (the
// provider timed out or failed, or the portal died while asking): each is
// read back from its provider first — a refund made is kept as made, one
// failed as refused — and asked again, with the same idempotency key,
// when the provider has none. It returns how many it settled.
func (s *Server) RetryRefunds(ctx context.Context) (int, error) {
	parts, err := s.db.PendingRefundParts(ctx, s.cfg.WallClock.Now().Add(-refundRetryAfter), 100)
	if err != nil {
		return 0, err
	}
	settled := 0
	for _, part := range parts {
		p, err := s.provider(part.Provider)
		if err != nil {
			continue // not this portal's provider (now): another asks
		}
		found, err := p.RefundStatus(ctx, part)
		switch {
		case err != nil:
			err = s.db.RefundPartUnknown(ctx, part.RefundID, part.TopUpID, "outcome unknown, read back failed: "+err.Error())
		case found != nil:
			err = s.db.SettleRefundPart(ctx, *found)
		default:
			err = s.askRefund(ctx, part)
		}
		if err != nil {
			return settled, err
		}
		settled++
	}
	return settled, nil
}

func (s *Server) apiApproveRefund(c echo.Context) error {
	r, err := s.approveRefund(c)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, r)
}

type rejectJSON struct {
	Why string `json:"why"`
}

func (s *Server) apiRejectRefund(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	var in rejectJSON
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	r, err := s.db.RejectRefund(c.Request().Context(), currentUser(c), id, in.Why)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, r)
}

func topUpStatusParam(c echo.Context) (string, error) {
	switch v := c.QueryParam("status"); v {
	case "", gpuportal.TopUpPending, gpuportal.TopUpPaid, gpuportal.TopUpExpired:
		return v, nil
	default:
		return "", gpuportal.FieldErrorf(gpuportal.EINVALID, "status", "Unknown status %q.", v)
	}
}

func (s *Server) apiAdminTopUps(c echo.Context) error {
	status, err := topUpStatusParam(c)
	if err != nil {
		return err
	}
	p, err := listParams(c)
	if err != nil {
		return err
	}
	list, err := s.db.AdminTopUps(c.Request().Context(), currentUser(c), status, p)
	if err != nil {
		return err
	}
	return withTotal(c, p, list)
}

// --- pages ---

func (s *Server) handleRefundRequestForm(c echo.Context) error {
	amount, err := gpuportal.ParseYuan(c.FormValue("amount"))
	if err != nil {
		return err
	}
	if _, err := s.db.RequestRefund(c.Request().Context(), currentUser(c), amount, c.FormValue("note")); err != nil {
		return err
	}
	s.addFlash(c, "success", i18n.T(reqOf(c).lang, "Your request for %s back is with the administrators; the money goes back to the payments it came from.", amount.String()))
	return redirect(c, "/ledger")
}

func (s *Server) handlePaymentsPage(c echo.Context) error {
	status, err := topUpStatusParam(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	topups, err := s.db.AdminTopUps(ctx, currentUser(c), status, store.Page{Limit: 200})
	if err != nil {
		return err
	}
	refunds, err := s.db.RefundRequests(ctx, currentUser(c), true, "", store.Page{Limit: 200})
	if err != nil {
		return err
	}
	return s.render(c, http.StatusOK, templates.Payments(templates.PaymentsPage{TopUps: topups, Refunds: refunds, Status: status, Stripe: s.stripe != nil}))
}

func (s *Server) handleApproveRefundForm(c echo.Context) error {
	r, err := s.approveRefund(c)
	if err != nil {
		return err
	}
	lang := reqOf(c).lang
	if r.Status == gpuportal.RefundRefunded {
		s.addFlash(c, "success", i18n.T(lang, "Refund #%d of %s sent back.", r.ID, r.Amount.String()))
	} else {
		s.addFlash(c, "error", i18n.T(lang, "Refund #%d: the provider refused (%s); the money is back in the balance.", r.ID, r.Error))
	}
	return redirect(c, "/admin/payments")
}

func (s *Server) handleRejectRefundForm(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	if _, err := s.db.RejectRefund(c.Request().Context(), currentUser(c), id, c.FormValue("why")); err != nil {
		return err
	}
	s.addFlash(c, "info", i18n.T(reqOf(c).lang, "Refund request #%d rejected.", id))
	return redirect(c, "/admin/payments")
}

// ledgerRefunds is the ledger page's list of the user's refund requests.
func (s *Server) ledgerRefunds(c echo.Context) ([]gpuportal.RefundRequest, error) {
	return s.db.RefundRequests(c.Request().Context(), currentUser(c), false, "", store.Page{Limit: 10})
}
