package web

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"gpuportal/store"
)

// idempotent honours the Idempotency-Key header on a creating POST: the
// first answer (success or refusal, a server error too: its outcome is not
// known) is stored per user and key before it is sent, and a retry gets it
// again instead of creating a second thing — also one that comes while the
// first still runs, which waits for that answer. Only a 503 (the store
// wrote nothing) releases the key for a retry. Requests without the
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
		if errors.Is(err, store.ErrIdempotencyInFlight) {
			stored, err = s.awaitIdempotentAnswer(ctx, u.ID, key)
		}
		if err != nil {
			return err
		}
		if stored != nil {
			c.Response().Header().Set("Idempotent-Replayed", "true")
			return c.Blob(stored.Status, echo.MIMEApplicationJSON, []byte(stored.Body))
		}

		// The answer is held back until it is stored: a retry that comes
		// the moment the client has it must find it.
		real := c.Response().Writer
		rec := &recorder{header: http.Header{}}
		c.Response().Writer = rec
		if err := next(c); err != nil {
			c.Error(err)
		}
		c.Response().Writer = real
		// Store the answer even if the client has gone: its retry needs it.
		storeCtx := context.WithoutCancel(ctx)
		status := c.Response().Status
		if status == http.StatusServiceUnavailable {
			if err := s.db.ReleaseIdempotencyKey(storeCtx, u.ID, key); err != nil {
				s.log.Error("release idempotency key", "err", err)
			}
		} else if err := s.db.FinishIdempotencyKey(storeCtx, u.ID, key, status, rec.body.String()); err != nil {
			s.log.Error("store idempotent answer", "err", err)
		}
		for k, v := range rec.header {
			real.Header()[k] = v
		}
		real.WriteHeader(status)
		_, _ = real.Write(rec.body.Bytes())
		return nil
	}
}

// idempotentWait is how long a retry waits for the first request with its
// key to answer before giving up with a conflict (its process may have died).
const idempotentWait = 30 * time.Second

// awaitIdempotentAnswer waits for the answer of a request with the same
// key that is still running.
func (s *Server) awaitIdempotentAnswer(ctx context.Context, userID int64, key string) (*store.StoredResponse, error) {
	deadline := time.NewTimer(idempotentWait)
	defer deadline.Stop()
	poll := time.NewTicker(10 * time.Millisecond)
	defer poll.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-deadline.C:
			return nil, store.ErrIdempotencyInFlight
		case <-poll.C:
		}
		stored, err := s.db.IdempotentAnswer(ctx, userID, key)
		if err != nil || stored != nil {
			return stored, err
		}
	}
}

// recorder keeps what a handler writes, to be sent once it is stored.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header         { return r.header }
func (r *recorder) Write(p []byte) (int, error) { return r.body.Write(p) }
func (r *recorder) WriteHeader(status int)      { r.status = status }

// Flush keeps holding what was written (a page's renderer flushes as it
// ends; the held answer goes out in one piece).
func (r *recorder) Flush() {}
