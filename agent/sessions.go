package agent

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/coder/websocket"
	"github.com/creack/pty"

	"gpuportal"
	"gpuportal/sessions/stream"
)

// Sessioner is a runtime that can open sessions into its workloads: run a
// command inside one (as its user, in its namespaces) and connect to a
// port inside its network.
type Sessioner interface {
	// SessionCommand is argv run inside p's workload; tty asks for a
	// terminal (the agent gives the command one, and the runtime passes it
	// on to the workload). Every process of the session carries
	// sessionEnv=id in its environment (see hangUp).
	// env: the client's own variables (LANG, LC_*, TERM), already checked.
	SessionCommand(p Process, id string, argv []string, tty bool, env []string) (*exec.Cmd, error)
	// DialInside connects to host:port as the workload would ("" is
	// its own 127.0.0.1).
	DialInside(p Process, host string, port int) (net.Conn, error)
	// SFTPServer is the path of the SFTP helper as the workload sees it
	// ("" when the node has none).
	SFTPServer() string
}

// liveSession is a session stream the agent serves.
type liveSession struct {
	instanceID int64
	tty        bool
	conn       *stream.Conn
	cancel     context.CancelFunc
}

// startSessions connects out for each session of d not seen before.
func (a *Agent) startSessions(ctx context.Context, list []gpuportal.DesiredSession) {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := time.Now()
	for id, at := range a.sessionsSeen {
		if now.Sub(at) > 2*gpuportal.SessionConnectTimeout {
			delete(a.sessionsSeen, id)
		}
	}
	for _, ds := range list {
		if _, seen := a.sessionsSeen[ds.ID]; seen {
			continue
		}
		a.sessionsSeen[ds.ID] = now
		go a.serveSession(ctx, ds)
	}
}

// dialSession opens a stream to the portal that holds session ds's
// customer: the session's own ("stream"), or one to its client's SSH
// agent ("agent-forward").
func (a *Agent) dialSession(ctx context.Context, ds gpuportal.DesiredSession, which string) (*websocket.Conn, error) {
	base := ds.URL
	if base == "" {
		base = a.cfg.Portal
	}
	url := strings.TrimRight(base, "/") + "/api/v1/agent/sessions/" + ds.ID + "/" + which
	url = "ws" + strings.TrimPrefix(url, "http") // http→ws, https→wss
	header := http.Header{}
	if t := a.client.token.Load(); t != nil {
		header.Set("Authorization", "Bearer "+*t)
	}
	dialCtx, cancelDial := context.WithTimeout(ctx, gpuportal.SessionConnectTimeout)
	defer cancelDial()
	// Not the API client: its timeout would cut a long session short.
	ws, _, err := websocket.Dial(dialCtx, url, &websocket.DialOptions{HTTPClient: &http.Client{Transport: a.cfg.HTTPClient.Transport}, HTTPHeader: header})
	return ws, err
}

// serveSession connects out to the portal for one session and runs it.
func (a *Agent) serveSession(ctx context.Context, ds gpuportal.DesiredSession) {
	ws, err := a.dialSession(ctx, ds, "stream")
	if err != nil {
		a.log.Warn("cannot connect out for a session", "session", ds.ID, "instance", ds.InstanceID, "err", err)
		return
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	conn := stream.Agent(sctx, ws)
	defer conn.CloseNow()

	a.mu.Lock()
	w := a.workloads[ds.InstanceID]
	var proc Process
	if w != nil && w.rec.Attempt == ds.Attempt && !w.exited {
		proc = w.proc
	}
	rt, ok := a.cfg.Runtime.(Sessioner)
	live := &liveSession{instanceID: ds.InstanceID, tty: ds.TTY != nil, conn: conn, cancel: cancel}
	if proc != nil {
		a.sessions[ds.ID] = live
	}
	motd := a.motdLocked(w)
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		delete(a.sessions, ds.ID)
		a.mu.Unlock()
	}()
	fail := func(format string, args ...any) {
		_ = conn.Control(gpuportal.SessionControl{Error: fmt.Sprintf(format, args...)})
		_ = conn.Close()
	}
	if ds.Kind == gpuportal.SessionLog {
		a.sendLog(conn, ds.InstanceID, ds.LogOffset, w != nil && !w.exited)
		return
	}
	if ds.Kind == gpuportal.SessionVolume {
		a.log.Info("volume session", "session", ds.ID, "volume", ds.VolumeID)
		err := a.serveVolume(conn, ds.VolumeID, ds.VolumeSizeGiB, ds.VolumeReadOnly)
		// What the session wrote shows in the portal at the next
		// heartbeat, not a minute later.
		a.volumeReport.Store(a.measureVolumes())
		if err != nil {
			fail("volume %d: %v", ds.VolumeID, err)
			return
		}
		_ = conn.Close()
		return
	}
	switch {
	case proc == nil:
		fail("instance %d is not running on this node", ds.InstanceID)
		return
	case !ok:
		fail("this node's runtime (%s) does not offer sessions", a.cfg.Runtime.Name())
		return
	}
	a.log.Info("session", "session", ds.ID, "instance", ds.InstanceID, "kind", ds.Kind, "port", ds.Port)
	switch ds.Kind {
	case gpuportal.SessionTCP:
		c, err := rt.DialInside(proc, ds.Host, ds.Port)
		if err != nil && ds.Host == "" {
			fail("nothing answers on port %d inside the instance: %v", ds.Port, err)
			return
		} else if err != nil {
			fail("the instance cannot reach %s: %v", net.JoinHostPort(ds.Host, fmt.Sprint(ds.Port)), err)
			return
		}
		joinTCP(conn, c)
		_ = conn.Close()
		return
	}
	var argv []string
	switch ds.Kind {
	case gpuportal.SessionShell, gpuportal.SessionTerminal:
		// The image's bash when it has one (colours, history), else sh.
		argv = []string{"/bin/sh", "-c", "if command -v bash >/dev/null 2>&1; then exec bash -l; else exec sh -l; fi"}
	case gpuportal.SessionExec:
		argv = []string{"/bin/sh", "-c", ds.Command}
	case gpuportal.SessionSFTP:
		helper := rt.SFTPServer()
		if helper == "" {
			fail("this node has no SFTP helper (the agent's --sftp-helper)")
			return
		}
		argv = []string{helper}
	default:
		fail("unknown session kind %q", ds.Kind)
		return
	}
	env := sessionVariables(ds)
	if ds.AgentForward && ds.Kind != gpuportal.SessionSFTP {
		_, inContainer := a.cfg.Runtime.(*ContainerRuntime)
		sock, stop, err := a.agentSocket(sctx, ds, w.rec.CheckpointDir, inContainer)
		if err != nil {
			a.log.Warn("cannot offer the session the client's SSH agent", "session", ds.ID, "err", err)
		} else {
			defer stop()
			env = append(env, "SSH_AUTH_SOCK="+sock)
		}
	}
	cmd, err := rt.SessionCommand(proc, ds.ID, argv, ds.TTY != nil, env)
	if err != nil {
		fail("%v", err)
		return
	}
	if ds.TTY != nil && motd != "" {
		_, _ = conn.Write([]byte(motd))
	}
	code := runCommand(conn, cmd, ds.TTY, func() { hangUp(ds.ID) })
	_ = conn.Control(gpuportal.SessionControl{Exit: &code})
	_ = conn.Close()
}

// sessionEnv marks the processes of a session (GPUPORTAL_SESSION=<id>):
// when the customer goes away, hangUp finds them by it.
const sessionEnv = "GPUPORTAL_SESSION"

// hangUp sends SIGHUP to every process of session id, as a terminal's
// hang-up does: `podman exec` going away leaves what it started running
// in the container, so the agent finds the session's processes itself
// (by their environment; it runs as root). Those that ignore SIGHUP
// (nohup) keep running, as after an ordinary SSH logout.
func hangUp(id string) {
	marker := []byte(sessionEnv + "=" + id + "\x00")
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err == nil && bytes.Contains(env, marker) {
			_ = syscall.Kill(pid, syscall.SIGHUP)
		}
	}
}

// runCommand runs cmd joined to the stream (on a pty of tty's size when
// tty is set) and returns its exit status. hangUp ends what the session
// started when the customer goes away first.
func runCommand(conn *stream.Conn, cmd *exec.Cmd, tty *gpuportal.TTY, hangUp func()) int {
	if tty != nil {
		f, err := pty.StartWithSize(cmd, &pty.Winsize{Cols: uint16(max(tty.Cols, 1)), Rows: uint16(max(tty.Rows, 1))})
		if err != nil {
			_, _ = conn.WriteStderr([]byte("gpuportal: cannot start the shell: " + err.Error() + "\r\n"))
			return 255
		}
		defer f.Close()
		conn.OnControl = func(ctl gpuportal.SessionControl) {
			if ctl.Resize != nil {
				_ = pty.Setsize(f, &pty.Winsize{Cols: uint16(max(ctl.Resize.Cols, 1)), Rows: uint16(max(ctl.Resize.Rows, 1))})
			}
			signalCommand(cmd, ctl.Signal)
		}
		go func() {
			_, _ = io.Copy(f, conn)
			// The customer closed the session: a hang-up.
			hangUp()
			_ = cmd.Process.Signal(syscall.SIGHUP)
		}()
		_, _ = io.Copy(conn, f) // until the shell and all that hold the pty end (EIO)
		return exitCode(cmd.Wait())
	}
	conn.OnControl = func(ctl gpuportal.SessionControl) { signalCommand(cmd, ctl.Signal) }
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return 255
	}
	cmd.Stdout, cmd.Stderr = conn, conn.StderrWriter()
	if err := cmd.Start(); err != nil {
		_, _ = conn.WriteStderr([]byte("gpuportal: cannot start the command: " + err.Error() + "\n"))
		return 255
	}
	// The customer going away hangs the command up — also when its input
	// ended long before (`ssh -n`, a script's closed stdin): the stream's
	// closure itself is watched, not only its input. A command that ends
	// first is not hung up after.
	var exited atomic.Bool
	go func() {
		_, _ = io.Copy(stdin, conn)
		_ = stdin.Close() // EOF for the command
		if !conn.Closed() {
			conn.AwaitClose()
		}
		if !exited.Load() {
			hangUp()
			// The node-side half (podman exec) goes too: left waiting on
			// what was hung up, it held node memory outside any limit.
			_ = cmd.Process.Signal(syscall.SIGHUP)
		}
	}()
	code := exitCode(cmd.Wait())
	exited.Store(true)
	return code
}

func exitCode(err error) int {
	var exitErr *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exitErr):
		if ws, ok := exitErr.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return exitErr.ExitCode()
	default:
		return 255
	}
}

// sessionSignals are the signals a customer may send (RFC 4254 names).
var sessionSignals = map[string]syscall.Signal{
	"INT": syscall.SIGINT, "TERM": syscall.SIGTERM, "HUP": syscall.SIGHUP, "KILL": syscall.SIGKILL,
	"QUIT": syscall.SIGQUIT, "USR1": syscall.SIGUSR1, "USR2": syscall.SIGUSR2,
}

func signalCommand(cmd *exec.Cmd, name string) {
	if sig, ok := sessionSignals[name]; ok && cmd.Process != nil {
		_ = cmd.Process.Signal(sig)
	}
}

// joinTCP copies both ways between a session stream and a connection
// inside the instance, passing each side's end of input on.
func joinTCP(conn *stream.Conn, c net.Conn) {
	defer c.Close()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, _ = io.Copy(c, conn)
		if tc, ok := c.(interface{ CloseWrite() error }); ok {
			_ = tc.CloseWrite()
		}
	}()
	_, _ = io.Copy(conn, c)
	_ = conn.CloseWrite()
	wg.Wait()
}

// motdLocked is what a shell prints at login: what the instance is and,
// when one is pending, its interruption notice.
func (a *Agent) motdLocked(w *workload) string {
	if w == nil {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "gpuportal · instance %d (%s) · %d GPU · node %s\r\n", w.rec.InstanceID, w.rec.Lifecycle, len(w.rec.GPUs), a.creds.NodeID)
	fmt.Fprintf(&b, "Checkpoints go in %s; they outlive an interruption.\r\n", a.checkpointDirSeen(w))
	if line := a.noticeLineLocked(w); line != "" {
		b.WriteString(line)
	}
	return b.String()
}

func (a *Agent) checkpointDirSeen(w *workload) string {
	if _, ok := a.cfg.Runtime.(*ContainerRuntime); ok {
		return ContainerCheckpointDir
	}
	return w.rec.CheckpointDir
}

// noticeLineLocked is the line a shell shows for w's pending notice.
func (a *Agent) noticeLineLocked(w *workload) string {
	if w.rec.NoticeAt.IsZero() || w.rec.Deadline.IsZero() {
		return ""
	}
	left := max(0, w.rec.Deadline.Sub(a.clock.Now()).Round(time.Second))
	what := "interrupted"
	if w.rec.Action == "stop" {
		what = "stopped"
	}
	if w.rec.Drill {
		what += " (a drill)"
	}
	return fmt.Sprintf("\r\n*** gpuportal: this instance will be %s at %s (in %s, reason: %s). Save your work to the checkpoint directory now. ***\r\n",
		what, w.rec.Deadline.UTC().Format("15:04:05 UTC"), left, w.rec.Reason)
}

// announceNoticeLocked writes w's new notice into its open shells.
func (a *Agent) announceNoticeLocked(w *workload) {
	line := a.noticeLineLocked(w)
	if line == "" {
		return
	}
	for _, s := range a.sessions {
		if s.instanceID == w.rec.InstanceID && s.tty {
			go func() { _, _ = s.conn.Write([]byte(line)) }()
		}
	}
}

// endSessionsLocked closes the sessions into an instance that ended.
func (a *Agent) endSessionsLocked(instanceID int64) {
	for _, s := range a.sessions {
		if s.instanceID == instanceID {
			s.cancel()
		}
	}
}

// sessionVariables are what a session adds to the workload's
// environment: the client's locale (SetEnv/SendEnv) and, on a terminal,
// its TERM. The portal checked them; they are checked again here, as
// everything a node is told that ends up in a command line.
func sessionVariables(ds gpuportal.DesiredSession) []string {
	var env []string
	for _, kv := range ds.Env {
		name, value, _ := strings.Cut(kv, "=")
		if gpuportal.SessionEnvAllowed(name, value) {
			env = append(env, kv)
		}
	}
	if ds.TTY != nil {
		term := ds.TTY.Term
		if term == "" || !gpuportal.SessionEnvAllowed("TERM", term) {
			term = "xterm-256color"
		}
		env = append(env, "TERM="+term)
	}
	return env
}

// SessionCommand runs argv in the container as its user
// (`podman exec`), with a terminal when tty is set.
func (r *ContainerRuntime) SessionCommand(p Process, id string, argv []string, tty bool, env []string) (*exec.Cmd, error) {
	args := []string{"exec", "--interactive", "--workdir", ContainerCheckpointDir, "--env", sessionEnv + "=" + id}
	if tty {
		args = append(args, "--tty")
	}
	for _, kv := range env {
		args = append(args, "--env", kv)
	}
	args = append(append(args, p.ID()), argv...)
	return exec.Command(r.CLI, args...), nil
}

// DialInside connects from the container's own network namespace: to its
// loopback, or to a host it may reach (its egress rules apply, as to the
// workload's own connections). A name is resolved by the container's own
// name servers, also from inside.
func (r *ContainerRuntime) DialInside(p Process, host string, port int) (net.Conn, error) {
	if host == "" {
		return dialInNetns(p.PID(), fmt.Sprintf("127.0.0.1:%d", port))
	}
	addr, err := resolveInside(p.PID(), host)
	if err != nil {
		return nil, err
	}
	return dialInNetns(p.PID(), net.JoinHostPort(addr, fmt.Sprint(port)))
}

func (r *ContainerRuntime) SFTPServer() string {
	if r.SFTPHelper == "" {
		return ""
	}
	return gpuportal.SFTPHelperPath
}

// SessionCommand runs argv as the workload does: its user, its
// directory and, when isolated, its PID and mount namespaces.
func (r ExecRuntime) SessionCommand(p Process, id string, argv []string, tty bool, env []string) (*exec.Cmd, error) {
	var cmd *exec.Cmd
	if r.Init != "" {
		args := []string{"--target", fmt.Sprint(p.PID()), "--pid", "--mount", "--setuid", fmt.Sprint(r.UID), "--setgid", fmt.Sprint(r.GID), "--"}
		cmd = exec.Command("nsenter", append(args, argv...)...)
	} else {
		cmd = exec.Command(argv[0], argv[1:]...)
	}
	if dir, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", p.PID())); err == nil {
		cmd.Dir = dir
	}
	// The workload's own environment (its GPUs, its instance's
	// variables), as its first process got it.
	if raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", p.PID())); err == nil {
		for _, kv := range strings.Split(string(raw), "\x00") {
			if kv != "" {
				cmd.Env = append(cmd.Env, kv)
			}
		}
	}
	if len(cmd.Env) == 0 {
		cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + cmd.Dir, "LANG=C.UTF-8"}
	}
	cmd.Env = append(append(cmd.Env, sessionEnv+"="+id), env...)
	return cmd, nil
}

// DialInside: an exec workload shares the node's network.
func (r ExecRuntime) DialInside(_ Process, host string, port int) (net.Conn, error) {
	if host == "" {
		host = "127.0.0.1"
	}
	return net.DialTimeout("tcp", net.JoinHostPort(host, fmt.Sprint(port)), 5*time.Second)
}

func (r ExecRuntime) SFTPServer() string { return r.SFTPHelper }

// sendLog streams an instance's whole log (as the workload wrote it: the
// container engine's framing decoded), then exit status 0. From an
// offset (gpu logs -f), only what is new: headed by a LogRange line, and
// only whole lines while the workload still writes.
func (a *Agent) sendLog(conn *stream.Conn, instanceID int64, offset *int64, writing bool) {
	f, err := os.Open(a.logPath(instanceID))
	if err != nil {
		_ = conn.Control(gpuportal.SessionControl{Error: fmt.Sprintf("this node no longer has the log of instance %d (logs are kept %s after the end)", instanceID, a.retention())})
		_ = conn.Close()
		return
	}
	defer f.Close()
	var src io.Reader = f
	if offset != nil {
		rng, from, to, err := logSlice(f, a.logPath(instanceID), *offset, writing)
		if err != nil {
			_ = conn.Control(gpuportal.SessionControl{Error: fmt.Sprintf("the log of instance %d: %v", instanceID, err)})
			_ = conn.Close()
			return
		}
		head, _ := json.Marshal(rng)
		if _, err := conn.Write(append(head, '\n')); err != nil {
			return
		}
		src = io.NewSectionReader(f, from, to-from)
	}
	decode, _ := a.cfg.Runtime.(interface{ DecodeLog(string) string })
	r := bufio.NewReaderSize(src, 256<<10)
	var chunk strings.Builder
	flush := func() bool {
		if chunk.Len() == 0 {
			return true
		}
		text := chunk.String()
		chunk.Reset()
		if decode != nil {
			text = decode.DecodeLog(text)
		}
		_, err := conn.Write([]byte(text))
		return err == nil
	}
	for {
		line, err := r.ReadString('\n')
		chunk.WriteString(line)
		if chunk.Len() >= 256<<10 && !flush() {
			return
		}
		if err != nil {
			break
		}
	}
	if !flush() {
		return
	}
	code := 0
	_ = conn.Control(gpuportal.SessionControl{Exit: &code})
	_ = conn.Close()
}

// agentSocket offers a session the client's SSH agent (ssh -A): a socket
// in the instance's checkpoint directory, owned by the workload's user,
// each connection to which the agent joins to a stream of its own to the
// portal, which opens an agent channel back to the client. It returns the
// socket's path as the workload sees it, and stop, which removes it.
func (a *Agent) agentSocket(ctx context.Context, ds gpuportal.DesiredSession, ckptDir string, inContainer bool) (string, func(), error) {
	name := ".gpuportal-ssh-agent-" + ds.ID[:min(len(ds.ID), 12)] + ".sock"
	hostPath := filepath.Join(ckptDir, name)
	dir, err := os.Open(ckptDir)
	if err != nil {
		return "", nil, err
	}
	// Bound through the directory's descriptor: the host path may be
	// longer than a socket address takes (108 bytes).
	ln, err := net.Listen("unix", fmt.Sprintf("/proc/self/fd/%d/%s", dir.Fd(), name))
	dir.Close()
	if err != nil {
		return "", nil, err
	}
	ul := ln.(*net.UnixListener)
	ul.SetUnlinkOnClose(false) // its bound name was the descriptor's
	// The workload's user (who owns its checkpoint directory) may connect;
	// Lchown: never through a link the workload may have put there.
	var st syscall.Stat_t
	if err := syscall.Stat(ckptDir, &st); err == nil {
		_ = os.Lchown(hostPath, int(st.Uid), int(st.Gid))
	}
	go func() {
		for {
			c, err := ul.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				ws, err := a.dialSession(ctx, ds, "agent-forward")
				if err != nil {
					a.log.Warn("cannot reach the client's SSH agent", "session", ds.ID, "err", err)
					return
				}
				conn := stream.Agent(ctx, ws)
				defer conn.CloseNow()
				joinTCP(conn, c)
			}()
		}
	}()
	inside := hostPath
	if inContainer {
		inside = ContainerCheckpointDir + "/" + name
	}
	return inside, func() {
		_ = ul.Close()
		_ = os.Remove(hostPath)
	}, nil
}
