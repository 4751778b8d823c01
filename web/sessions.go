package web

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"

	"github.com/coder/websocket"
	"github.com/labstack/echo/v4"

	"gpuportal"
	"gpuportal/sessions"
	"gpuportal/web/templates"
)

// apiAgentSessionStream is a node's agent connecting out for a session
// this portal holds: its node token, a session of its node that waits
// here and has not been claimed. The request then carries the stream
// (a WebSocket) until the session ends.
func (s *Server) apiAgentSessionStream(c echo.Context) error {
	node, err := s.nodeOf(c)
	if err != nil {
		return err
	}
	id := c.Param("id")
	// Checked before the claim: a session held by another portal stays
	// unclaimed for the agent to take there.
	if !s.hub.Waiting(id) {
		return gpuportal.Errorf(gpuportal.ENOTFOUND, "No session %s waits on this portal.", id)
	}
	if _, err := s.db.ClaimSession(c.Request().Context(), node, id); err != nil {
		return err
	}
	if err := s.hub.Accept(c.Response(), c.Request(), id); errors.Is(err, sessions.ErrNotWaiting) {
		return gpuportal.Errorf(gpuportal.ENOTFOUND, "No session %s waits on this portal.", id)
	} else if err != nil {
		s.log.Warn("session stream", "session", id, "node", node, "err", err)
	}
	return nil
}

// apiAgentForwardStream is a node's stream to the SSH agent of the client
// of one of its sessions (ssh -A): a connection to the session's agent
// socket inside the instance.
func (s *Server) apiAgentForwardStream(c echo.Context) error {
	node, err := s.nodeOf(c)
	if err != nil {
		return err
	}
	id := c.Param("id")
	if err := s.db.CheckAgentForward(c.Request().Context(), node, id); err != nil {
		return err
	}
	if err := s.hub.AcceptForward(c.Response(), c.Request(), id); errors.Is(err, sessions.ErrNotWaiting) {
		return gpuportal.Errorf(gpuportal.ENOTFOUND, "No session %s of this node forwards an SSH agent.", id)
	} else if err != nil {
		s.log.Warn("agent forward stream", "session", id, "node", node, "err", err)
	}
	return nil
}

// apiSSH tells a customer where the SSH gateway is (for ~/.ssh/config).
func (s *Server) apiSSH(c echo.Context) error {
	if s.cfg.SSH.Port == 0 {
		return gpuportal.Errorf(gpuportal.ENOTFOUND, "This portal runs no SSH gateway (--ssh-addr is empty).")
	}
	return c.JSON(http.StatusOK, s.cfg.SSH)
}

// terminalMessage is a text frame of the web terminal's WebSocket.
type terminalMessage struct {
	Resize *gpuportal.TTY `json:"resize,omitempty"`
	Exit   *int           `json:"exit,omitempty"`
	Error  string         `json:"error,omitempty"`
}

// handleTerminalWS is the web terminal's WebSocket: the owner's browser
// session, same origin only (the library refuses another Origin), a shell
// with a pty in the instance. Binary frames carry the terminal's bytes
// both ways; text frames carry terminalMessage.
func (s *Server) handleTerminalWS(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	user := currentUser(c)
	cols, _ := strconv.Atoi(c.QueryParam("cols"))
	rows, _ := strconv.Atoi(c.QueryParam("rows"))
	tty := &gpuportal.TTY{Term: "xterm-256color", Cols: min(max(cols, 20), 500), Rows: min(max(rows, 5), 200)}
	if cols == 0 || rows == 0 {
		tty.Cols, tty.Rows = 120, 32
	}
	ws, err := websocket.Accept(c.Response(), c.Request(), nil)
	if err != nil {
		return nil // the library answered (403 for another Origin)
	}
	ctx := c.Request().Context()
	sendText := func(m terminalMessage) {
		raw, _ := json.Marshal(m)
		_ = ws.Write(ctx, websocket.MessageText, raw)
	}
	conn, done, err := s.hub.Open(ctx, user, id, gpuportal.SessionRequest{Kind: gpuportal.SessionTerminal, TTY: tty, Group: gpuportal.NewSessionID()})
	if err != nil {
		sendText(terminalMessage{Error: gpuportal.ErrorMessage(err)})
		_ = ws.Close(websocket.StatusNormalClosure, "")
		return nil
	}
	defer done()
	ws.SetReadLimit(64 << 10)
	go func() {
		for {
			typ, msg, err := ws.Read(ctx)
			if err != nil {
				_ = conn.CloseWrite()
				return
			}
			if typ == websocket.MessageBinary {
				if _, err := conn.Write(msg); err != nil {
					return
				}
				continue
			}
			var m terminalMessage
			if json.Unmarshal(msg, &m) == nil && m.Resize != nil && m.Resize.Cols > 0 && m.Resize.Rows > 0 {
				_ = conn.Control(gpuportal.SessionControl{Resize: &gpuportal.TTY{Term: tty.Term, Cols: min(m.Resize.Cols, 500), Rows: min(m.Resize.Rows, 200)}})
			}
		}
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := conn.Read(buf)
		if n > 0 {
			if werr := ws.Write(ctx, websocket.MessageBinary, buf[:n]); werr != nil {
				return nil
			}
		}
		if err != nil {
			break
		}
	}
	switch {
	case conn.Failure() != "":
		sendText(terminalMessage{Error: conn.Failure()})
	case conn.Exit() != nil:
		sendText(terminalMessage{Exit: conn.Exit()})
	default:
		sendText(terminalMessage{Error: "The session was lost: the instance ended or its node went away."})
	}
	_ = ws.Close(websocket.StatusNormalClosure, "")
	return nil
}

// handleTerminalPage is the web terminal of a running instance (its
// owner's only).
func (s *Server) handleTerminalPage(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	i, err := s.db.Instance(c.Request().Context(), currentUser(c), id)
	if err != nil {
		return err
	}
	if i.UserID != currentUser(c).ID {
		return gpuportal.Errorf(gpuportal.EFORBIDDEN, "Only the instance's owner opens sessions into it.")
	}
	if !gpuportal.AcceptsSessions(i.Status) {
		return gpuportal.Errorf(gpuportal.ECONFLICT, "Instance %d is %s: sessions open only while it runs.", id, i.Status)
	}
	return s.render(c, http.StatusOK, templates.TerminalPage(*i))
}

// handleOpenPort hands the owner of a running instance one of its ports
// as a web app: a one-time token, and a 303 to the app's own origin,
// which turns it into a cookie for itself alone. The form on the
// instance page sends the port as ?port=N.
func (s *Server) handleOpenPort(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	raw := c.Param("port")
	if raw == "" {
		raw = c.QueryParam("port")
	}
	port, err := strconv.Atoi(raw)
	if err != nil {
		return gpuportal.FieldErrorf(gpuportal.EINVALID, "port", "A port is a number from 1 to 65535.")
	}
	token, err := s.db.CreateAppToken(c.Request().Context(), currentUser(c), id, port)
	if err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, s.apps.OpenURL(s.scheme(c), s.portalPort(c), id, port, token))
}

// scheme is how users reach this portal: the public URL's, else the
// request's.
func (s *Server) scheme(c echo.Context) string {
	if u, err := url.Parse(s.cfg.PublicURL); err == nil && u.Scheme != "" {
		return u.Scheme
	}
	if s.isHTTPS(c) {
		return "https"
	}
	return "http"
}

// portalPort is the port users reach this portal on (apps share it): the
// public URL's, else the request's.
func (s *Server) portalPort(c echo.Context) string {
	if u, err := url.Parse(s.cfg.PublicURL); err == nil && u.Host != "" {
		return u.Port()
	}
	_, port, _ := net.SplitHostPort(c.Request().Host)
	return port
}

// apiInstanceLog is an instance's whole log, fetched from the node its
// workload ran on (also after it ended, while the node keeps it), as a
// download.
func (s *Server) apiInstanceLog(c echo.Context) error {
	id, err := pathID(c)
	if err != nil {
		return err
	}
	req := gpuportal.SessionRequest{Kind: gpuportal.SessionLog, Group: gpuportal.NewSessionID()}
	if v := c.QueryParam("offset"); v != "" {
		// gpu logs -f: only what is new since the last answer's
		// X-Log-End, whatever trims happened between.
		off, err := strconv.ParseInt(v, 10, 64)
		if err != nil || off < 0 {
			return gpuportal.FieldErrorf(gpuportal.EINVALID, "offset", "The offset is a whole number of bytes, 0 or more (the X-Log-End of the last answer).")
		}
		req.LogOffset = &off
	}
	conn, done, err := s.hub.Open(c.Request().Context(), currentUser(c), id, req)
	if err != nil {
		return err
	}
	defer done()
	// The first chunk (or the node's refusal) before the answer's status.
	buf := make([]byte, 64<<10)
	n, readErr := io.ReadFull(conn, buf)
	if n == 0 && conn.Failure() != "" {
		return gpuportal.Errorf(gpuportal.EGONE, "The node could not send the log: %s.", conn.Failure())
	}
	h := c.Response().Header()
	if req.LogOffset != nil {
		// The node heads what it sends with where it starts and ends.
		line, rest, ok := bytes.Cut(buf[:n], []byte("\n"))
		var rng gpuportal.LogRange
		if !ok || json.Unmarshal(line, &rng) != nil {
			return gpuportal.Errorf(gpuportal.EGONE, "The node could not send the log from an offset (its agent may predate it): ask for the whole log.")
		}
		h.Set("X-Log-Start", strconv.FormatInt(rng.Start, 10))
		h.Set("X-Log-End", strconv.FormatInt(rng.End, 10))
		n = copy(buf, rest)
	}
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Content-Disposition", fmt.Sprintf(`attachment; filename="instance-%d.log"`, id))
	c.Response().WriteHeader(http.StatusOK)
	if _, err := c.Response().Write(buf[:n]); err != nil || readErr != nil {
		return nil
	}
	_, _ = io.CopyBuffer(c.Response(), conn, buf)
	return nil
}
