package web

import (
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"gpuportal/web/static"
)

// routes lists every route in one place.
func (s *Server) routes() {
	e := s.echo
	// Bodies are small, but for files uploaded into a volume (streamed to
	// its storage, bounded by its free space) by a signed-in user
	// (limitAnonymousUploads keeps the limit for anyone else).
	bodyLimit := middleware.BodyLimitWithConfig(middleware.BodyLimitConfig{Limit: "2M", Skipper: isVolumeUpload})
	e.Use(removeParsedForms, s.measure, middleware.Recover(), s.logRequests, bodyLimit, s.securityHeaders, compress())
	e.GET("/healthz", s.handleHealth)
	e.GET("/metrics", s.handleMetrics(), s.metricsAllowed)
	e.GET("/static/*", echo.WrapHandler(http.StripPrefix("/static/", staticFiles())))
	// Browsers ask for /favicon.ico on their own; answer with the icon.
	e.GET("/favicon.ico", func(c echo.Context) error {
		c.Request().URL.Path = "/favicon.svg"
		return echo.WrapHandler(staticFiles())(c)
	})

	// Payment providers sign their calls; no session, no token.
	e.POST("/api/v1/payments/:provider/webhook", s.apiPaymentWebhook)

	// Everything below knows who is asking.
	app := e.Group("", s.authenticate, s.actForTeam, limitAnonymousUploads, s.checkCSRF)

	// Pages.
	app.GET("/", s.handleHome)
	app.GET("/signup", s.handleSignupPage)
	app.POST("/signup", s.handleSignupForm)
	app.GET("/login", s.handleLoginPage)
	app.POST("/login", s.handleLoginForm)
	app.POST("/logout", s.handleLogout)
	app.GET("/password-reset", s.handleResetRequestPage)
	app.POST("/password-reset", s.handleResetRequestForm)
	app.GET("/password-reset/:token", s.handleResetPage)
	app.POST("/password-reset/:token", s.handleResetForm)
	app.POST("/settings/password", s.handlePasswordForm, requireUser)
	app.POST("/admin/password-reset", s.handleIssueResetForm, requireAdmin)
	app.GET("/admin/users", s.handleUsersPage, requireAdmin)
	app.POST("/admin/users/:id/credit", s.handleCreditForm, requireAdmin)
	app.POST("/admin/users/:id/account", s.handleAccountForm, requireAdmin)
	app.GET("/admin/payments", s.handlePaymentsPage, requireAdmin)
	app.POST("/admin/refund-requests/:id/approve", s.handleApproveRefundForm, requireAdmin)
	app.POST("/admin/refund-requests/:id/reject", s.handleRejectRefundForm, requireAdmin)
	app.POST("/refund-requests", s.handleRefundRequestForm, requireUser)
	app.GET("/admin/images", s.handleImagesPage, requireAdmin)
	app.GET("/admin/regions", s.handleRegionsPage, requireAdmin)
	app.POST("/admin/regions/:id/env", s.handleRegionEnvForm, requireAdmin)
	app.POST("/admin/images", s.handleAddImageForm, requireAdmin)
	app.POST("/admin/images/:id/delete", s.handleDeleteImageForm, requireAdmin)
	app.POST("/lang", s.handleSetLang)
	app.GET("/settings", s.handleSettings, requireUser)
	app.POST("/settings/profile", s.handleProfileForm, requireUser)
	app.POST("/settings/tokens", s.handleCreateTokenForm, requireUser)
	app.POST("/settings/tokens/:id/revoke", s.handleRevokeTokenForm, requireUser)
	app.GET("/volumes", s.handleVolumesPage, requireUser)
	app.POST("/images", s.handleImportImageForm, requireUser)
	app.POST("/images/:id/delete", s.handleDeletePrivateImageForm, requireUser)
	app.POST("/volumes", s.handleCreateVolumeForm, requireUser)
	app.GET("/volumes/:id", s.handleVolumePage, requireUser)
	app.POST("/volumes/:id/resize", s.handleResizeVolumeForm, requireUser)
	app.POST("/volumes/:id/delete", s.handleDeleteVolumeForm, requireUser)
	app.POST("/volumes/:id/files", s.handleUploadForm, requireUser)
	app.POST("/volumes/:id/files/delete", s.handleDeleteFileForm, requireUser)
	app.POST("/settings/ssh-keys", s.handleAddSSHKeyForm, requireUser)
	app.POST("/settings/ssh-keys/:id/delete", s.handleDeleteSSHKeyForm, requireUser)
	app.GET("/verify-email/:token", s.handleVerifyEmail)
	app.POST("/settings/verify-email", s.handleResendVerificationForm, requireUser)
	app.POST("/settings/phone/code", s.handleSendPhoneCodeForm, requireUser)
	app.POST("/settings/phone/verify", s.handleVerifyPhoneForm, requireUser)
	app.GET("/rates", s.handleRatesPage)
	app.GET("/api", s.handleAPIReference)
	app.GET("/calendar", s.handleCalendar)
	app.GET("/calendar/grid", s.handleCalendarGrid)
	app.GET("/calendar/quote", s.handleCalendarQuote)
	app.GET("/calendar/offerings", s.handleCalendarOfferings)
	app.GET("/reservations", s.handleReservationsPage, requireUser)
	app.POST("/reservations", s.handleBookForm, requireUser)
	app.GET("/reservations/:id", s.handleReservationPage, requireUser)
	app.GET("/reservations/:id/cancel", s.handleCancelPage, requireUser)
	app.POST("/reservations/:id/cancel", s.handleCancelForm, requireUser)
	app.POST("/reservations/:id/extend", s.handleExtendForm, requireUser)
	app.POST("/reservations/:id/launch", s.handleLaunchOnReservationForm, requireUser)
	app.GET("/reservations/:id/ics", s.handleICS, requireUser)
	app.GET("/ledger", s.handleLedgerPage, requireUser)
	app.GET("/ledger.csv", s.handleStatementCSV, requireUser)
	app.POST("/topups", s.handleTopUpForm, requireUser)
	app.POST("/ledger/budget", s.handleBudgetForm, requireUser)
	app.GET("/pay/:provider/:id", s.handleTestPayPage, requireUser)
	app.POST("/pay/:provider/:id", s.handleTestPayConfirm, requireUser)
	app.GET("/instances", s.handleInstancesPage, requireUser)
	app.GET("/instances/list", s.handleInstanceList, requireUser)
	app.GET("/instances/launch-form", s.handleLaunchFormPanel, requireUser)
	app.GET("/instances/:id", s.handleInstancePage, requireUser)
	app.GET("/instances/:id/live", s.handleInstanceLive, requireUser)
	app.GET("/instances/:id/terminal", s.handleTerminalPage, requireUser)
	app.GET("/instances/:id/terminal/ws", s.handleTerminalWS, requireUser)
	app.GET("/instances/:id/ports/open", s.handleOpenPort, requireUser)
	app.GET("/instances/:id/ports/:port/open", s.handleOpenPort, requireUser)
	app.POST("/instances", s.handleLaunchForm, requireUser)
	app.POST("/instances/:id/stop", s.handleStopForm, requireUser)
	app.POST("/instances/:id/start", s.handleStartForm, requireUser)
	app.POST("/instances/:id/images", s.handleSaveInstanceImageForm, requireUser)
	app.POST("/instances/:id/release", s.handleReleaseDiskForm, requireUser)
	app.POST("/instances/:id/drill", s.handleDrillForm, requireUser)
	app.GET("/jobs", s.handleJobsPage, requireUser)
	app.GET("/jobs/list", s.handleJobList, requireUser)
	app.GET("/jobs/estimate", s.handleJobEstimate, requireUser)
	app.POST("/jobs", s.handleJobForm, requireUser)
	app.GET("/jobs/:id", s.handleJobPage, requireUser)
	app.GET("/jobs/:id/live", s.handleJobLive, requireUser)
	app.GET("/jobs/:id/tasks/:index", s.handleTaskPage, requireUser)
	app.POST("/jobs/:id/cancel", s.handleCancelJobForm, requireUser)
	app.GET("/admin/nodes", s.handleFleetPage, requireAdmin)
	app.GET("/admin/nodes/table", s.handleFleetTable, requireAdmin)
	app.GET("/admin/nodes/:id", s.handleFleetNodePage, requireAdmin)
	app.POST("/admin/nodes/:id/drain", s.handleDrainForm, requireAdmin)
	app.POST("/admin/gpus/:uuid/return", s.handleReturnGPUForm, requireAdmin)
	app.GET("/admin/maintenance", s.handleMaintenancePage, requireAdmin)
	app.POST("/admin/maintenance", s.handleMaintenanceForm, requireAdmin)
	app.POST("/admin/maintenance/:id/end", s.handleEndMaintenanceForm, requireAdmin)
	app.POST("/admin/nodes/:id/rotate-token", s.handleRotateTokenForm, requireAdmin)
	app.POST("/admin/nodes/:id/revoke-token", s.handleRevokeNodeTokenForm, requireAdmin)
	app.GET("/waitlist", s.handleWaitlistPage, requireUser)
	app.POST("/waitlist", s.handleJoinForm, requireUser)
	app.POST("/waitlist/:id/claim", s.handleClaimForm, requireUser)
	app.POST("/waitlist/:id/leave", s.handleLeaveForm, requireUser)
	app.GET("/notifications", s.handleNotificationsPage, requireUser)
	app.POST("/settings/notifications", s.handlePrefsForm, requireUser)
	app.GET("/admin/notifications", s.handleOutboxPage, requireAdmin)
	app.POST("/admin/notifications/:id/resend", s.handleResendForm, requireAdmin)
	app.GET("/admin/policies", s.handlePolicyPage, requireAdmin)
	app.POST("/admin/policies", s.handlePolicyForm, requireAdmin)
	app.POST("/admin/policies/what-if", s.handleWhatIf, requireAdmin)
	app.GET("/admin/policies/what-if/:id", s.handleWhatIfStatus, requireAdmin)
	app.GET("/admin/audit", s.handleAuditPage, requireAdmin)
	app.GET("/teams", s.handleTeamsPage, requireUser)
	app.POST("/teams", s.handleCreateTeamForm, requireUser)
	app.POST("/teams/switch", s.handleSwitchTeam, requireUser)
	app.GET("/teams/:id", s.handleTeamPage, requireUser)
	app.POST("/teams/:id/invitations", s.handleInviteForm, requireUser)
	app.POST("/teams/:id/members/:user_id", s.handleMemberForm, requireUser)
	app.POST("/teams/:id/members/:user_id/remove", s.handleRemoveMemberForm, requireUser)
	app.POST("/teams/:id/delete", s.handleDeleteTeamForm, requireUser)
	app.POST("/teams/:id/tokens/:token_id/revoke", s.handleRevokeTeamTokenForm, requireUser)
	app.GET("/webhooks", s.handleWebhooksPage, requireUser)
	app.POST("/webhooks", s.handleCreateWebhookForm, requireUser)
	app.POST("/webhooks/:id/secret", s.handleRollWebhookSecretForm, requireUser)
	app.POST("/webhooks/:id/delete", s.handleDeleteWebhookForm, requireUser)
	app.POST("/webhooks/:id/test", s.handleTestWebhookForm, requireUser)
	app.POST("/webhooks/:id/deliveries/:delivery_id/redeliver", s.handleRedeliverForm, requireUser)
	app.GET("/invitations/:token", s.handleInvitationPage)
	app.POST("/invitations/:token/accept", s.handleAcceptInvitationForm, requireUser)
	app.GET("/admin", s.handleAdmin, requireAdmin)
	app.POST("/admin/models/:id/price", s.handleSetPriceForm, requireAdmin)

	// JSON API.
	api := app.Group("/api/v1")
	api.POST("/auth/signup", s.apiSignup)
	api.POST("/auth/tokens", s.apiCreateToken)
	api.POST("/auth/password", s.apiChangePassword, requireUser)
	api.POST("/auth/password-reset", s.apiRequestReset)
	api.POST("/auth/password-reset/:token", s.apiReset)
	api.GET("/auth/tokens", s.apiListTokens, requireUser)
	api.DELETE("/auth/tokens/:id", s.apiRevokeToken, requireUser)
	api.GET("/me", s.apiMe, requireUser)
	api.POST("/refund-requests", s.apiRequestRefund, requireUser)
	api.GET("/refund-requests", s.apiRefundRequests, requireUser)
	api.GET("/admin/topups", s.apiAdminTopUps, requireAdmin)
	api.GET("/admin/refund-requests", s.apiAdminRefundRequests, requireAdmin)
	api.POST("/admin/refund-requests/:id/approve", s.apiApproveRefund, requireAdmin)
	api.POST("/admin/refund-requests/:id/reject", s.apiRejectRefund, requireAdmin)
	api.POST("/me/verify-email", s.apiResendVerification, requireUser)
	api.POST("/me/phone/code", s.apiSendPhoneCode, requireUser)
	api.POST("/me/phone/verify", s.apiVerifyPhone, requireUser)
	api.GET("/openapi.json", s.apiOpenAPI)
	api.GET("/models", s.apiModels)
	api.GET("/regions", s.apiRegions)
	api.GET("/catalog", s.apiCatalog)
	api.PUT("/admin/regions/:id", s.apiSetRegion, requireAdmin)
	api.PUT("/admin/models/:id", s.apiSetPrice, requireAdmin)
	api.GET("/admin/policies", s.apiGetPolicies, requireAdmin)
	api.PUT("/admin/policies", s.apiPutPolicies, requireAdmin)
	api.POST("/admin/policies/what-if", s.apiWhatIf, requireAdmin)

	api.GET("/interruption-rates", s.apiRates)
	api.GET("/availability", s.apiAvailability)
	api.GET("/quote", s.apiQuote)
	api.POST("/reservations", s.apiBook, requireUser, s.idempotent)
	api.GET("/reservations", s.apiReservations, requireUser)
	api.GET("/reservations/:id", s.apiReservation, requireUser)
	api.GET("/reservations/:id/cancellation", s.apiCancellationPreview, requireUser)
	api.POST("/reservations/:id/cancel", s.apiCancel, requireUser, s.idempotent)
	api.GET("/reservations/:id/ics", s.handleICS, requireUser)
	api.GET("/reservations/:id/extension", s.apiExtension, requireUser)
	api.POST("/reservations/:id/extend", s.apiExtend, requireUser, s.idempotent)
	api.POST("/reservations/:id/launch", s.apiLaunchOnReservation, requireUser, s.idempotent)
	api.GET("/offerings", s.apiOfferings)
	api.POST("/volumes", s.apiCreateVolume, requireUser)
	api.GET("/volumes", s.apiVolumes, requireUser)
	api.GET("/volumes/:id", s.apiVolume, requireUser)
	api.PUT("/volumes/:id", s.apiResizeVolume, requireUser)
	api.DELETE("/volumes/:id", s.apiDeleteVolume, requireUser)
	api.GET("/volumes/:id/files", s.apiVolumeFiles, requireUser)
	api.DELETE("/volumes/:id/files", s.apiVolumeDeleteFile, requireUser)
	api.GET("/volumes/:id/files/content", s.apiVolumeDownload, requireUser)
	api.PUT("/volumes/:id/files/content", s.apiVolumeUpload, requireUser)
	api.POST("/ssh-keys", s.apiAddSSHKey, requireUser)
	api.GET("/ssh-keys", s.apiSSHKeys, requireUser)
	api.DELETE("/ssh-keys/:id", s.apiDeleteSSHKey, requireUser)
	api.GET("/ssh", s.apiSSH, requireUser)
	api.GET("/ledger", s.apiLedger, requireUser)
	api.GET("/balance", s.apiBalance, requireUser)
	api.GET("/spend", s.apiSpend, requireUser)
	api.PUT("/me/budget", s.apiSetBudget, requireUser)
	api.POST("/topups", s.apiCreateTopUp, requireUser, s.idempotent)
	api.GET("/topups", s.apiTopUps, requireUser)
	api.POST("/instances", s.apiLaunch, requireUser, s.idempotent)
	api.GET("/instances", s.apiInstances, requireUser)
	api.GET("/instances/:id", s.apiInstance, requireUser)
	api.POST("/instances/:id/stop", s.apiStop, requireUser)
	api.POST("/instances/:id/start", s.apiStart, requireUser)
	api.POST("/instances/:id/images", s.apiSaveInstanceImage, requireUser)
	api.DELETE("/instances/:id", s.apiReleaseDisk, requireUser)
	api.POST("/instances/:id/drill", s.apiDrill, requireUser, s.idempotent)
	api.GET("/instances/:id/samples", s.apiInstanceSamples, requireUser)
	api.GET("/instances/:id/log", s.apiInstanceLog, requireUser)

	api.POST("/jobs", s.apiCreateJob, requireUser, s.idempotent)
	api.GET("/jobs", s.apiJobs, requireUser)
	api.GET("/jobs/:id", s.apiJob, requireUser)
	api.GET("/jobs/:id/tasks", s.apiJobTasks, requireUser)
	api.POST("/jobs/:id/cancel", s.apiCancelJob, requireUser)

	api.POST("/waitlist", s.apiJoinWaitlist, requireUser, s.idempotent)
	api.GET("/waitlist", s.apiWaitlist, requireUser)
	api.DELETE("/waitlist/:id", s.apiLeaveWaitlist, requireUser)
	api.POST("/waitlist/:id/claim", s.apiClaim, requireUser)
	api.GET("/notifications", s.apiInApp, requireUser)
	api.GET("/admin/notifications", s.apiOutbox, requireAdmin)
	api.POST("/admin/notifications/:id/resend", s.apiResend, requireAdmin)

	api.GET("/admin/users", s.apiAdminUsers, requireAdmin)
	api.POST("/admin/users/:id/credit", s.apiAdminCredit, requireAdmin)
	api.PUT("/admin/users/:id", s.apiUpdateAccount, requireAdmin)
	api.GET("/admin/audit", s.apiAudit, requireAdmin)
	api.GET("/admin/tick-failures", s.apiTickFailures, requireAdmin)
	api.GET("/admin/nodes", s.apiNodes, requireAdmin)
	api.POST("/admin/nodes/:id/drain", s.apiDrain, requireAdmin)
	api.POST("/admin/nodes/:id/rotate-token", s.apiRotateNodeToken, requireAdmin)
	api.POST("/admin/nodes/:id/revoke-token", s.apiRevokeNodeToken, requireAdmin)
	api.POST("/admin/enrollment-tokens", s.apiEnrollmentToken, requireAdmin)
	api.POST("/admin/instances/:id/interrupt", s.apiAdminInterrupt, requireAdmin)
	api.POST("/admin/gpus/:uuid/return", s.apiReturnGPU, requireAdmin)
	api.POST("/admin/maintenance", s.apiCreateMaintenance, requireAdmin)
	api.GET("/admin/maintenance", s.apiMaintenance, requireAdmin)
	api.DELETE("/admin/maintenance/:id", s.apiEndMaintenance, requireAdmin)
	api.POST("/admin/clock", s.apiClock, requireAdmin)
	api.POST("/admin/users/:id/password-reset", s.apiIssueReset, requireAdmin)
	api.POST("/teams", s.apiCreateTeam, requireUser)
	api.GET("/teams", s.apiTeams, requireUser)
	api.GET("/teams/:id", s.apiTeam, requireUser)
	api.DELETE("/teams/:id", s.apiDeleteTeam, requireUser)
	api.POST("/teams/:id/invitations", s.apiInvite, requireUser)
	api.GET("/teams/:id/invitations", s.apiInvitations, requireUser)
	api.GET("/teams/:id/members", s.apiMembers, requireUser)
	api.PUT("/teams/:id/members/:user_id", s.apiUpdateMember, requireUser)
	api.DELETE("/teams/:id/members/:user_id", s.apiRemoveMember, requireUser)
	api.GET("/teams/:id/audit", s.apiTeamAudit, requireUser)
	api.POST("/webhooks", s.apiCreateWebhook, requireUser)
	api.GET("/webhooks", s.apiWebhooks, requireUser)
	api.GET("/webhooks/:id", s.apiWebhook, requireUser)
	api.DELETE("/webhooks/:id", s.apiDeleteWebhook, requireUser)
	api.POST("/webhooks/:id/secret", s.apiRollWebhookSecret, requireUser)
	api.POST("/webhooks/:id/test", s.apiTestWebhook, requireUser)
	api.GET("/webhooks/:id/deliveries", s.apiWebhookDeliveries, requireUser)
	api.POST("/webhooks/:id/deliveries/:delivery_id/redeliver", s.apiRedeliver, requireUser)
	api.GET("/teams/:id/tokens", s.apiTeamTokens, requireUser)
	api.DELETE("/teams/:id/tokens/:token_id", s.apiRevokeTeamToken, requireUser)
	api.POST("/invitations/:token/accept", s.apiAcceptInvitation, requireUser)
	api.POST("/admin/teams/:id/credit", s.apiAdminCreditTeam, requireAdmin)
	api.GET("/images", s.apiImages)
	api.POST("/images", s.apiImportImage, requireUser)
	api.GET("/images/:id", s.apiPrivateImage, requireUser)
	api.DELETE("/images/:id", s.apiDeletePrivateImage, requireUser)
	api.POST("/admin/images", s.apiAddImage, requireAdmin)
	api.DELETE("/admin/images/:id", s.apiDeleteImage, requireAdmin)

	// The agent protocol (node tokens, not user sessions).
	api.POST("/agent/register", s.apiAgentRegister)
	api.POST("/agent/heartbeat", s.apiAgentHeartbeat)
	api.POST("/agent/events", s.apiAgentEvents)
	api.POST("/agent/rotate-token", s.apiAgentRotateToken)
	api.GET("/agent/sessions/:id/stream", s.apiAgentSessionStream)
	api.GET("/agent/sessions/:id/agent-forward", s.apiAgentForwardStream)

	// Anything else under /api/ is a JSON 404, not a page.
	api.Any("/*", func(c echo.Context) error { return echo.ErrNotFound })
}

// staticFiles serves the embedded assets: a request naming the asset's
// current version (static.URL) may be kept for a year; any other for an
// hour.
func staticFiles() http.Handler {
	fs := http.FileServer(http.FS(static.FS))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if v := r.URL.Query().Get("v"); v != "" && v == static.Version(strings.TrimPrefix(r.URL.Path, "/")) {
			w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
		} else {
			w.Header().Set("Cache-Control", "public, max-age=3600")
		}
		fs.ServeHTTP(w, r)
	})
}

// compress gzips pages, JSON and assets for clients that accept it —
// not the agents' heartbeats (many, small, and on the hot path), nor
// /metrics (the Prometheus handler compresses its own).
func compress() echo.MiddlewareFunc {
	return middleware.GzipWithConfig(middleware.GzipConfig{
		Level:     5,
		MinLength: 1024,
		Skipper: func(c echo.Context) bool {
			p := c.Request().URL.Path
			return strings.HasPrefix(p, "/api/v1/agent/") || p == "/metrics" || strings.HasSuffix(p, "/terminal/ws")
		},
	})
}

func (s *Server) handleHealth(c echo.Context) error {
	ctx := c.Request().Context()
	if err := s.db.Ping(ctx); err != nil {
		return c.JSON(http.StatusServiceUnavailable, map[string]string{"status": "unavailable"})
	}
	if !s.db.WritesHealthy(ctx) {
		return c.JSON(http.StatusServiceUnavailable, map[string]string{"status": "unavailable", "database": s.db.Dialect(), "reason": "writes fail: the database disk is full or failing"})
	}
	health := map[string]any{"status": "ok", "database": s.db.Dialect()}
	if s.cfg.Scheduler != nil {
		health["scheduler"] = "standby" // another portal on the database runs it
		if s.cfg.Scheduler.Leading() {
			health["scheduler"] = "leader"
		}
		// Decisions that failed alone in the last hour: the platform runs,
		// but someone's thing was left undone (GET /admin/tick-failures).
		if failed, err := s.db.TickFailures(ctx, s.cfg.Clock.Now().Add(-time.Hour), 1000); err == nil {
			health["failed_decisions_last_hour"] = len(failed)
		}
		if h := s.cfg.Scheduler.Health(); h.FailingFor(s.cfg.WallClock.Now()) >= TicksFailingUnhealthy {
			health["status"] = "unavailable"
			health["reason"] = "scheduler ticks fail: " + h.LastError
			return c.JSON(http.StatusServiceUnavailable, health)
		}
	}
	return c.JSON(http.StatusOK, health)
}

// TicksFailingUnhealthy is how long the scheduler's ticks may fail in a
// row before /healthz says so (503): three of cron's minutes, so one
// passing failure (a lost connection) is not an outage.
var TicksFailingUnhealthy = 3 * time.Minute

// securityHeaders: no framing, no sniffing, and a CSP that allows only our
// own scripts and styles.
func (s *Server) securityHeaders(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		h := c.Response().Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; frame-ancestors 'none'")
		return next(c)
	}
}

func (s *Server) logRequests(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := s.cfg.WallClock.Now()
		err := next(c)
		if err != nil {
			c.Error(err)
		}
		path := c.Request().URL.Path
		if len(path) < 8 || path[:8] != "/static/" {
			s.log.Debug("request", "method", c.Request().Method, "path", path, "status", c.Response().Status,
				"duration_ms", s.cfg.WallClock.Now().Sub(start).Milliseconds())
		}
		return nil
	}
}
