package sessions

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"

	"gpuportal"
	"gpuportal/sessions/stream"
)

// hostKeySetting is where the gateway's host key lives: in the database,
// so a restart or another portal presents the same key.
const hostKeySetting = "ssh_host_key"

// handshakeTimeout bounds how long a client may take to log in.
const handshakeTimeout = 30 * time.Second

// Gateway is the SSH server customers log into their instances through:
// `ssh -p 2222 <instance id>@portal` with a key the instance's owner
// registered. Keys only: no passwords, no keyboard-interactive.
type Gateway struct {
	hub     *Hub
	backend Backend
	log     *slog.Logger
	config  *ssh.ServerConfig
	// Fingerprint is the host key's, as ssh-keygen -l prints it.
	Fingerprint string

	// limits admits connections per address (sshlimits.go).
	limits *doorLimits

	mu     sync.Mutex
	ln     net.Listener
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// NewGateway loads (or, the first time, makes and keeps) the host key.
func NewGateway(ctx context.Context, hub *Hub, backend Backend, log *slog.Logger) (*Gateway, error) {
	if log == nil {
		log = slog.Default()
	}
	pemKey, err := backend.SettingOrInit(ctx, hostKeySetting, newHostKey)
	if err != nil {
		return nil, fmt.Errorf("SSH host key: %w", err)
	}
	signer, err := ssh.ParsePrivateKey([]byte(pemKey))
	if err != nil {
		return nil, fmt.Errorf("SSH host key: %w", err)
	}
	g := &Gateway{hub: hub, backend: backend, log: log, Fingerprint: ssh.FingerprintSHA256(signer.PublicKey()), conns: map[net.Conn]struct{}{},
		limits: newDoorLimits(time.Now)}
	g.config = &ssh.ServerConfig{
		Config: ssh.Config{
			// AES-GCM first and chacha20-poly1305 left out: OpenSSH takes
			// the client's first cipher the server also offers, which is
			// chacha20 when offered, and x/crypto's chacha20 is generic Go
			// on amd64 while AES-GCM uses the CPU's AES instructions —
			// about twice the throughput for scp and sftp on one core.
			Ciphers: []string{ssh.CipherAES128GCM, ssh.CipherAES256GCM, ssh.CipherAES128CTR, ssh.CipherAES192CTR, ssh.CipherAES256CTR},
		},
		PublicKeyCallback: g.authorize,
		MaxAuthTries:      6,
		ServerVersion:     "SSH-2.0-gpuportal",
	}
	g.config.AddHostKey(signer)
	return g, nil
}

func newHostKey() string {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		panic(err) // crypto/rand does not fail
	}
	block, err := ssh.MarshalPrivateKey(priv, "gpuportal SSH gateway")
	if err != nil {
		panic(err)
	}
	return string(pem.EncodeToMemory(block))
}

// errLogin is every refusal a client sees: which instances exist, and
// whose, is not its business.
var errLogin = errors.New("permission denied")

// authorize accepts a key of the instance's owner while it runs. The user
// name is the instance's id — or volume-<id> for SFTP into a volume's
// files, with a key of the volume's owner.
func (g *Gateway) authorize(meta ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
	if rest, ok := strings.CutPrefix(meta.User(), "volume-"); ok {
		id, err := strconv.ParseInt(rest, 10, 64)
		if err != nil || id <= 0 {
			return nil, errLogin
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		user, err := g.backend.VolumeSessionUser(ctx, id, ssh.FingerprintSHA256(key))
		if err != nil {
			g.log.Info("ssh login refused", "volume", id, "remote", meta.RemoteAddr().String(), "reason", err)
			return nil, errLogin
		}
		return &ssh.Permissions{Extensions: map[string]string{"user": strconv.FormatInt(user.ID, 10), "volume": rest}}, nil
	}
	id, err := strconv.ParseInt(strings.TrimPrefix(meta.User(), "i-"), 10, 64)
	if err != nil || id <= 0 {
		return nil, errLogin
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	user, err := g.backend.SessionUser(ctx, id, ssh.FingerprintSHA256(key))
	if err != nil {
		g.log.Info("ssh login refused", "instance", id, "remote", meta.RemoteAddr().String(), "reason", err)
		return nil, errLogin
	}
	return &ssh.Permissions{Extensions: map[string]string{"user": strconv.FormatInt(user.ID, 10), "instance": strconv.FormatInt(id, 10)}}, nil
}

// Serve accepts SSH connections on l until Close.
func (g *Gateway) Serve(l net.Listener) error {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return net.ErrClosed
	}
	g.ln = l
	g.mu.Unlock()
	for {
		c, err := l.Accept()
		if err != nil {
			g.mu.Lock()
			closed := g.closed
			g.mu.Unlock()
			if closed {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			return err
		}
		g.mu.Lock()
		if g.closed {
			g.mu.Unlock()
			_ = c.Close()
			return nil
		}
		g.conns[c] = struct{}{}
		g.wg.Add(1)
		g.mu.Unlock()
		go func() {
			defer g.wg.Done()
			host := hostOf(c.RemoteAddr())
			if handshaken, ok := g.limits.admit(host, handshakeTimeout); ok {
				g.serveConn(c, host, handshaken)
			} else {
				_ = c.Close() // over its address's limits: not a byte read
			}
			g.mu.Lock()
			delete(g.conns, c)
			g.mu.Unlock()
		}()
	}
}

// Close stops accepting and drops every connection.
func (g *Gateway) Close() error {
	g.limits.close()
	g.mu.Lock()
	g.closed = true
	if g.ln != nil {
		_ = g.ln.Close()
	}
	for c := range g.conns {
		_ = c.Close()
	}
	g.mu.Unlock()
	g.wg.Wait()
	return nil
}

func (g *Gateway) serveConn(c net.Conn, host string, handshaken func()) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(handshakeTimeout))
	conn, chans, reqs, err := ssh.NewServerConn(c, g.config)
	handshaken()
	if err != nil {
		var authErr *ssh.ServerAuthError
		if errors.As(err, &authErr) {
			g.limits.failed(host)
		}
		return
	}
	_ = c.SetDeadline(time.Time{})
	defer conn.Close()
	userID, _ := strconv.ParseInt(conn.Permissions.Extensions["user"], 10, 64)
	instanceID, _ := strconv.ParseInt(conn.Permissions.Extensions["instance"], 10, 64)
	volumeID, _ := strconv.ParseInt(conn.Permissions.Extensions["volume"], 10, 64)
	u := &gpuportal.User{ID: userID}
	group := hex.EncodeToString(conn.SessionID())
	group = group[:min(len(group), 32)]
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go ssh.DiscardRequests(reqs) // keepalives; -R (tcpip-forward) is refused
	var wg sync.WaitGroup
	for nc := range chans {
		switch nc.ChannelType() {
		case "session":
			ch, chReqs, err := nc.Accept()
			if err != nil {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				g.session(ctx, conn, u, instanceID, volumeID, group, ch, chReqs)
			}()
		case "direct-tcpip":
			if volumeID > 0 {
				_ = nc.Reject(ssh.Prohibited, "a volume offers SFTP only")
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				g.forward(ctx, u, instanceID, group, nc)
			}()
		default:
			_ = nc.Reject(ssh.UnknownChannelType, "not offered here")
		}
	}
	cancel()
	wg.Wait()
}

// session serves one "session" channel: a shell, a command or SFTP. Its
// requests are answered here; the session itself runs once "shell",
// "exec" or "subsystem" asks for it, and closes the channel when done.
func (g *Gateway) session(ctx context.Context, client ssh.Conn, u *gpuportal.User, instanceID, volumeID int64, group string, ch ssh.Channel, reqs <-chan *ssh.Request) {
	var (
		mu       sync.Mutex
		tty      *gpuportal.TTY
		env      []string
		agentFwd bool // the client asked for its agent (ssh -A)
		conn     *stream.Conn
		started  bool
	)
	// closed is closed once the client closed the channel (its requests
	// end with it) or left altogether (ctx): the session is over then,
	// whatever still runs inside — the agent hangs it up.
	closed := make(chan struct{})
	start := func(req gpuportal.SessionRequest) {
		go func() {
			defer ch.Close()
			mu.Lock()
			req.TTY, req.Env, req.Group = tty, env, group
			forward := agentFwd && volumeID == 0 && req.Kind != gpuportal.SessionSFTP
			mu.Unlock()
			if volumeID > 0 {
				// volume-<id>: SFTP into the volume's files, nothing else.
				if req.Kind != gpuportal.SessionSFTP {
					fmt.Fprintf(ch.Stderr(), "gpuportal: volume-%d offers SFTP only (sftp, scp); ssh into an instance that mounts it for a shell.\r\n", volumeID)
					sendExit(ch, 1)
					return
				}
				req = gpuportal.SessionRequest{Kind: gpuportal.SessionVolume, VolumeID: volumeID, Group: group}
			}
			var forwardTo func(*stream.Conn)
			if forward {
				forwardTo = func(c *stream.Conn) { forwardAgent(client, c) }
			}
			c, done, err := g.hub.OpenForwarding(ctx, u, instanceID, req, forwardTo)
			if err != nil {
				fmt.Fprintf(ch.Stderr(), "gpuportal: %s\r\n", gpuportal.ErrorMessage(err))
				sendExit(ch, 255)
				return
			}
			defer done()
			go endWith(ctx, closed, done)
			mu.Lock()
			conn = c
			if tty != nil && req.TTY != nil && *tty != *req.TTY {
				_ = c.Control(gpuportal.SessionControl{Resize: tty}) // resized while connecting
			}
			mu.Unlock()
			g.pump(ch, c, req.TTY != nil)
		}()
	}
	for r := range reqs {
		g.request(r, &mu, &tty, &env, &agentFwd, &conn, &started, start)
	}
	close(closed)
	mu.Lock()
	defer mu.Unlock()
	if !started {
		_ = ch.Close()
	}
}

// request answers one channel request of a session.
func (g *Gateway) request(r *ssh.Request, mu *sync.Mutex, tty **gpuportal.TTY, env *[]string, agentFwd *bool, conn **stream.Conn, started *bool, start func(gpuportal.SessionRequest)) {
	reply := func(ok bool) {
		if r.WantReply {
			_ = r.Reply(ok, nil)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	switch r.Type {
	case "pty-req":
		var p struct {
			Term          string
			Cols, Rows    uint32
			Width, Height uint32
			Modes         string
		}
		if ssh.Unmarshal(r.Payload, &p) != nil || *started {
			reply(false)
			return
		}
		*tty = &gpuportal.TTY{Term: p.Term, Cols: int(p.Cols), Rows: int(p.Rows)}
		reply(true)
	case "env":
		// SetEnv/SendEnv: the client's locale, as sshd's AcceptEnv takes.
		var p struct{ Name, Value string }
		if ssh.Unmarshal(r.Payload, &p) != nil || *started || len(*env) >= gpuportal.MaxSessionEnv || !gpuportal.SessionEnvAllowed(p.Name, p.Value) {
			reply(false)
			return
		}
		*env = append(*env, p.Name+"="+p.Value)
		reply(true)
	case "auth-agent-req@openssh.com":
		// ssh -A: the session gets SSH_AUTH_SOCK, each connection to it a
		// channel back to the client's agent (forwardAgent).
		if *started {
			reply(false)
			return
		}
		*agentFwd = true
		reply(true)
	case "window-change":
		var p struct{ Cols, Rows, Width, Height uint32 }
		if ssh.Unmarshal(r.Payload, &p) != nil || *tty == nil {
			reply(false)
			return
		}
		next := gpuportal.TTY{Term: (*tty).Term, Cols: int(p.Cols), Rows: int(p.Rows)}
		*tty = &next
		if *conn != nil {
			_ = (*conn).Control(gpuportal.SessionControl{Resize: &next})
		}
		reply(true)
	case "signal":
		var p struct{ Signal string }
		if ssh.Unmarshal(r.Payload, &p) != nil || *conn == nil {
			reply(false)
			return
		}
		_ = (*conn).Control(gpuportal.SessionControl{Signal: p.Signal})
		reply(true)
	case "shell", "exec", "subsystem":
		if *started {
			reply(false)
			return
		}
		req := gpuportal.SessionRequest{Kind: gpuportal.SessionShell}
		switch r.Type {
		case "exec":
			var p struct{ Command string }
			if ssh.Unmarshal(r.Payload, &p) != nil {
				reply(false)
				return
			}
			req = gpuportal.SessionRequest{Kind: gpuportal.SessionExec, Command: p.Command}
		case "subsystem":
			var p struct{ Name string }
			if ssh.Unmarshal(r.Payload, &p) != nil || p.Name != "sftp" {
				reply(false)
				return
			}
			req = gpuportal.SessionRequest{Kind: gpuportal.SessionSFTP}
		}
		*started = true
		reply(true)
		start(req)
	default:
		// X11: not offered.
		reply(false)
	}
}

// pump joins a session channel to its stream until the command ends. The
// end of the client's input is passed on, except on a terminal, where (as
// with sshd) it means nothing: the shell ends when it exits or the client
// goes away.
func (g *Gateway) pump(ch ssh.Channel, c *stream.Conn, tty bool) {
	c.Stderr = ch.Stderr()
	go func() {
		_, _ = io.Copy(c, ch)
		if !tty {
			_ = c.CloseWrite()
		}
	}()
	_, err := io.Copy(ch, c)
	switch {
	case c.Failure() != "":
		fmt.Fprintf(ch.Stderr(), "gpuportal: %s\r\n", c.Failure())
		sendExit(ch, 255)
	case c.Exit() != nil:
		sendExit(ch, *c.Exit())
	default:
		if err == nil {
			err = errors.New("the instance ended or its node went away")
		}
		fmt.Fprintf(ch.Stderr(), "\r\ngpuportal: session lost: %v\r\n", err)
		sendExit(ch, 255)
	}
	_ = ch.CloseWrite()
}

func sendExit(ch ssh.Channel, status int) {
	_, _ = ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{uint32(status)}))
}

// forward serves `ssh -L local:localhost:PORT` (a port inside the
// instance) and `ssh -D` or `-L local:HOST:PORT` (a host the instance may
// reach: its agent connects from inside the instance's network namespace,
// so its egress rules hold — never the node, other tenants or private
// ranges).
func (g *Gateway) forward(ctx context.Context, u *gpuportal.User, instanceID int64, group string, nc ssh.NewChannel) {
	var p struct {
		Host       string
		Port       uint32
		OriginHost string
		OriginPort uint32
	}
	if err := ssh.Unmarshal(nc.ExtraData(), &p); err != nil {
		_ = nc.Reject(ssh.ConnectionFailed, "bad request")
		return
	}
	host, ok := gpuportal.ForwardHost(p.Host)
	if !ok {
		_ = nc.Reject(ssh.Prohibited, "not a host name or an IP address")
		return
	}
	c, done, err := g.hub.Open(ctx, u, instanceID, gpuportal.SessionRequest{Kind: gpuportal.SessionTCP, Port: int(p.Port), Host: host, Group: group})
	if err != nil {
		_ = nc.Reject(ssh.ConnectionFailed, gpuportal.ErrorMessage(err))
		return
	}
	defer done()
	ch, reqs, err := nc.Accept()
	if err != nil {
		return
	}
	defer ch.Close()
	closed := make(chan struct{})
	go func() {
		ssh.DiscardRequests(reqs) // until the client closes the channel
		close(closed)
	}()
	go endWith(ctx, closed, done)
	go func() {
		_, _ = io.Copy(c, ch)
		_ = c.CloseWrite()
	}()
	_, _ = io.Copy(ch, c)
	_ = ch.CloseWrite()
}

// endWith ends a session (done) when its channel closes or its client's
// connection goes away, whichever comes first.
func endWith(ctx context.Context, closed <-chan struct{}, done func()) {
	select {
	case <-ctx.Done():
	case <-closed:
	}
	done()
}

// forwardAgent joins one connection to the forwarded agent socket inside
// the instance (c, the agent's stream) to a new auth-agent channel to the
// client, which answers it with its own ssh-agent.
func forwardAgent(client ssh.Conn, c *stream.Conn) {
	ch, reqs, err := client.OpenChannel("auth-agent@openssh.com", nil)
	if err != nil {
		return // the client stopped offering its agent, or went away
	}
	go ssh.DiscardRequests(reqs)
	defer ch.Close()
	go func() {
		_, _ = io.Copy(ch, c)
		_ = ch.CloseWrite()
	}()
	_, _ = io.Copy(c, ch)
	_ = c.CloseWrite()
}
