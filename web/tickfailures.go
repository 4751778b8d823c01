package web

import (
	"time"

	"github.com/labstack/echo/v4"
)

// apiTickFailures lists the scheduler's decisions that failed in the last
// day (each rolled back alone and its owner told; the rest of its tick
// applied), latest first: what an operator reads when /healthz counts
// failed decisions.
func (s *Server) apiTickFailures(c echo.Context) error {
	list, err := s.db.TickFailures(c.Request().Context(), s.cfg.Clock.Now().Add(-24*time.Hour), 200)
	if err != nil {
		return err
	}
	return c.JSON(200, list)
}
