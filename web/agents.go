package web

import (
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"gpuportal"
)

// maxLongPoll bounds how long a heartbeat may be held.
const maxLongPoll = 30 * time.Second

// nodeOf authenticates an agent by its node token.
func (s *Server) nodeOf(c echo.Context) (string, error) {
	token, ok := strings.CutPrefix(c.Request().Header.Get("Authorization"), "Bearer ")
	if !ok || token == "" {
		return "", gpuportal.Errorf(gpuportal.EUNAUTHORIZED, "A node token is required (Authorization: Bearer <node token>).")
	}
	return s.db.NodeByToken(c.Request().Context(), token)
}

func (s *Server) apiAgentRegister(c echo.Context) error {
	var reg gpuportal.AgentRegistration
	if err := bindJSON(c, &reg); err != nil {
		return err
	}
	creds, err := s.db.RegisterNode(c.Request().Context(), reg, s.cfg.WallClock.Now())
	if err != nil {
		return err
	}
	s.log.Info("node enrolled", "node", creds.NodeID, "hostname", reg.Hostname, "gpus", len(reg.GPUs))
	return c.JSON(http.StatusCreated, creds)
}

// apiAgentHeartbeat records liveness, telemetry and workload reports, then
// answers with the desired state — at once if it changed since the agent's
// revision, else when it changes (long poll) or the wait runs out.
func (s *Server) apiAgentHeartbeat(c echo.Context) error {
	node, err := s.nodeOf(c)
	if err != nil {
		return err
	}
	var hb gpuportal.AgentHeartbeat
	if err := bindJSON(c, &hb); err != nil {
		return err
	}
	ctx := c.Request().Context()
	if _, err := s.db.RecordHeartbeat(ctx, node, hb, s.cfg.WallClock.Now()); err != nil {
		return err
	}
	if err := s.db.ApplyWorkloadReports(ctx, node, hb.Workloads); err != nil {
		return err
	}
	if err := s.db.RecordImageReports(ctx, node, hb.Images); err != nil {
		return err
	}
	if hb.WaitSeconds > 0 {
		woken, stop := s.db.Wakeups.Wait(node)
		rev, err := s.db.NodeRevision(ctx, node)
		if err != nil {
			stop()
			if ctx.Err() != nil {
				return nil // the agent went away (it stopped, or gave up the poll)
			}
			return err
		}
		if rev == hb.Revision {
			timer := time.NewTimer(min(time.Duration(hb.WaitSeconds)*time.Second, maxLongPoll))
			select {
			case <-woken:
			case <-timer.C:
			case <-ctx.Done():
			}
			timer.Stop()
		}
		stop()
	}
	desired, err := s.db.DesiredFor(ctx, node)
	if err != nil {
		if ctx.Err() != nil {
			return nil // the agent went away while its answer was read
		}
		return err
	}
	if desired.DeleteVolumes, err = s.db.VolumesToRemove(ctx, node, hb.Volumes); err != nil {
		return err
	}
	if desired.ImportImages, desired.DeleteImages, err = s.db.ImageOrders(ctx, node); err != nil {
		return err
	}
	if desired.ReleaseDisks, err = s.db.ReleasedDisks(ctx, node); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, desired)
}

func (s *Server) apiAgentEvents(c echo.Context) error {
	node, err := s.nodeOf(c)
	if err != nil {
		return err
	}
	var ev gpuportal.AgentEvents
	if err := bindJSON(c, &ev); err != nil {
		return err
	}
	if err := s.db.ApplyWorkloadReports(c.Request().Context(), node, ev.Workloads); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]string{"status": "ok"})
}

// apiAgentRotateToken hands a node asked to rotate its token a new one.
func (s *Server) apiAgentRotateToken(c echo.Context) error {
	node, err := s.nodeOf(c)
	if err != nil {
		return err
	}
	token, err := s.db.NewNodeToken(c.Request().Context(), node)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, gpuportal.AgentCredentials{NodeID: node, NodeToken: token})
}

// apiRotateNodeToken (admin) asks a node's agent to switch to a new token.
func (s *Server) apiRotateNodeToken(c echo.Context) error {
	if err := s.db.RotateNodeToken(c.Request().Context(), currentUser(c), c.Param("id")); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"id": c.Param("id"), "token_state": gpuportal.NodeTokenRotating})
}

// apiRevokeNodeToken (admin) makes a node's token worthless at once.
func (s *Server) apiRevokeNodeToken(c echo.Context) error {
	if err := s.db.RevokeNodeToken(c.Request().Context(), currentUser(c), c.Param("id")); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"id": c.Param("id"), "token_state": gpuportal.NodeTokenRevoked})
}

type enrollRequest struct {
	Region string `json:"region"`
}

func (s *Server) apiEnrollmentToken(c echo.Context) error {
	var in enrollRequest
	if err := bindJSON(c, &in); err != nil {
		return err
	}
	tok, err := s.db.CreateEnrollmentToken(c.Request().Context(), currentUser(c), in.Region)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, map[string]string{"token": tok, "region": in.Region})
}

func (s *Server) apiNodes(c echo.Context) error {
	nodes, err := s.db.Nodes(c.Request().Context())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, nodes)
}

type drainRequest struct {
	Drain *bool `json:"drain"`
}

// apiDrain drains a node ({"drain": false} undrains it).
func (s *Server) apiDrain(c echo.Context) error {
	in := drainRequest{}
	if c.Request().ContentLength > 0 {
		if err := bindJSON(c, &in); err != nil {
			return err
		}
	}
	drain := in.Drain == nil || *in.Drain
	if err := s.db.SetDrain(c.Request().Context(), currentUser(c), c.Param("id"), drain); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"id": c.Param("id"), "drain": drain})
}
