package web

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"

	"github.com/labstack/echo/v4"
)

// idempotent honours the Idempotency-Key header on a creating POST: the
// first answer (success or refusal) is stored per user and key, and a retry
// gets it again instead of creating a second thing. Requests without the
// header, or from anonymous callers, run as usual.
func (s *Server) idempotent(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		key := c.Request().Header.Get("Idempotency-Key")
		u := currentUser(c)
		if key == "" || u == nil {
			return next(c)
		}
		body, err := io.ReadAll(http.MaxBytesReader(c.Response(), c.Request().Body, maxJSONBody))
		if err != nil {
			return jsonError(err)
		}
		c.Request().Body = io.NopCloser(bytes.NewReader(body))
		sum := sha256.Sum256(append([]byte(c.Request().Method+" "+c.Request().URL.RequestURI()+"\n"), body...))
		ctx := c.Request().Context()
		stored, err := s.db.ClaimIdempotencyKey(ctx, u.ID, key, hex.EncodeToString(sum[:]))
		if err != nil {
			return err
		}
		if stored != nil {
			c.Response().Header().Set("Idempotent-Replayed", "true")
			return c.Blob(stored.Status, echo.MIMEApplicationJSON, []byte(stored.Body))
		}

		rec := &recorder{ResponseWriter: c.Response().Writer}
		c.Response().Writer = rec
		if err := next(c); err != nil {
			c.Error(err)
		}
		// Store the answer even if the client has gone: its retry needs it.
		storeCtx := context.WithoutCancel(ctx)
		status := c.Response().Status
		if status >= 500 {
			if err := s.db.ReleaseIdempotencyKey(storeCtx, u.ID, key); err != nil {
				s.log.Error("release idempotency key", "err", err)
			}
			return nil
		}
		if err := s.db.FinishIdempotencyKey(storeCtx, u.ID, key, status, rec.body.String()); err != nil {
			s.log.Error("store idempotent answer", "err", err)
		}
		return nil
	}
}

// recorder copies what a handler writes.
type recorder struct {
	http.ResponseWriter
	body bytes.Buffer
}

func (r *recorder) Write(p []byte) (int, error) {
	r.body.Write(p)
	return r.ResponseWriter.Write(p)
}
