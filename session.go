package gpuportal

import (
	"crypto/rand"
	"encoding/hex"
	"net/netip"
	"strings"
	"time"
)

// Session kinds: what a session runs inside its instance.
const (
	SessionShell    = "shell"    // an interactive shell with a pty (SSH, the web terminal)
	SessionExec     = "exec"     // one command, its exit status returned (ssh host cmd)
	SessionSFTP     = "sftp"     // the SFTP helper (sftp, scp)
	SessionTCP      = "tcp"      // a TCP connection to a port inside (ssh -L, a proxied web app)
	SessionTerminal = "terminal" // the web terminal: a shell with a pty over a WebSocket
	SessionLog      = "log"      // the workload's whole log, from its node (also after it ended)
	SessionVolume   = "volume"   // SFTP into a volume's files (the file manager, sftp volume-<id>@), through any agent of its region
)

// Limits on sessions.
const (
	// MaxSessionsPerUser bounds a user's customer connections open at
	// once (an SSH connection, a web terminal, an app's connections).
	MaxSessionsPerUser = 20
	// MaxStreamsPerConnection bounds the streams one of them holds (SSH
	// channels and forwards: VS Code opens several; each is an agent
	// stream and a row), so that 20 connections cannot hold thousands.
	MaxStreamsPerConnection = 32
	// MaxStreamsPerNode bounds the streams open into one node, whoever's:
	// one customer's burst never takes a node's agent from the others.
	MaxStreamsPerNode = 1024
	// SessionConnectTimeout is how long a session waits for its node's
	// agent to connect out for it.
	SessionConnectTimeout = 20 * time.Second
	// SessionSeenEvery is how often the portal holding a session marks it
	// alive; one not marked for SessionStaleAfter counts as ended (its
	// portal died without closing it).
	SessionSeenEvery  = time.Minute
	SessionStaleAfter = 3 * time.Minute
)

// AcceptsSessions reports whether an instance in this status can be got
// into: while its workload runs (under a notice too, to save its work).
func AcceptsSessions(status InstanceStatus) bool {
	return status == InstanceRunning || status == InstanceInterrupting
}

// Session is an interactive connection into a running instance.
type Session struct {
	ID         string    `json:"id"`
	InstanceID int64     `json:"instance_id,omitempty"`
	VolumeID   int64     `json:"volume_id,omitempty"`
	UserID     int64     `json:"-"`
	Node       string    `json:"-"`
	Kind       string    `json:"kind"`
	Port       int       `json:"port,omitempty"`
	OpenedAt   time.Time `json:"opened_at"`
}

// SessionRequest is what a customer's connection asks of a session.
type SessionRequest struct {
	// ID names the session (random, chosen by the portal that holds the
	// customer's end, so it can wait for the agent before asking for it);
	// "" lets the store choose.
	ID      string
	Kind    string
	Command string // SessionExec
	Port    int    // SessionTCP
	// Host is where a SessionTCP connection goes as the instance reaches
	// it (ssh -D, -L to another host); "" is the instance's own loopback.
	Host string
	// VolumeID is the volume of a SessionVolume (the instance id is 0).
	VolumeID int64
	TTY      *TTY // a pty of this size (shells)
	// Env are the client's variables it asked for (SessionEnvAllowed).
	Env []string
	// AgentForward: the client offers its SSH agent (ssh -A).
	AgentForward bool
	// Group ties the streams of one customer connection together (the
	// channels and forwards of one SSH connection): the per-user limit
	// counts groups, not streams.
	Group string
	// LogOffset (SessionLog): send the log from this offset (of the
	// log as it began, whatever trims dropped since), headed by a line
	// that says where what is sent starts and ends (LogRangeLine).
	LogOffset *int64
}

// TTY is a terminal's type and size.
type TTY struct {
	Term string `json:"term,omitempty"`
	Cols int    `json:"cols"`
	Rows int    `json:"rows"`
}

// DesiredSession asks an agent to connect out to the portal for one
// session: GET <URL or its portal>/api/v1/agent/sessions/<ID>/stream with
// its node token, a WebSocket (see SessionControl for what it carries).
type DesiredSession struct {
	ID         string `json:"id"`
	InstanceID int64  `json:"instance_id"`
	Attempt    int    `json:"attempt"`
	// VolumeID and VolumeSizeGiB: a session into a volume's files (the
	// agent refuses writes past the size).
	VolumeID      int64 `json:"volume_id,omitempty"`
	VolumeSizeGiB int   `json:"volume_size_gib,omitempty"`
	// VolumeReadOnly: the volume is suspended (its owner's balance ran
	// out): its files are served for reading only.
	VolumeReadOnly bool   `json:"volume_read_only,omitempty"`
	Kind           string `json:"kind"`
	Command        string `json:"command,omitempty"`
	Port           int    `json:"port,omitempty"`
	Host           string `json:"host,omitempty"`
	TTY            *TTY   `json:"tty,omitempty"`
	// Env: the client's locale variables (LANG, LC_*), KEY=value.
	Env []string `json:"env,omitempty"`
	// AgentForward: offer the session a socket (SSH_AUTH_SOCK) whose
	// connections reach the client's SSH agent, each through a stream of
	// its own to /api/v1/agent/sessions/{id}/agent-forward.
	AgentForward bool `json:"agent_forward,omitempty"`
	// URL is the portal that holds the customer's end ("" = the agent's
	// own portal): with several portals, the agent connects to that one.
	URL string `json:"url,omitempty"`
	// LogOffset: see SessionRequest.LogOffset.
	LogOffset *int64 `json:"log_offset,omitempty"`
}

// LogRange is where a log sent from an offset starts and ends, as
// offsets of the log since it began: Start is past the offset asked for
// when a trim dropped what was there; End is where to ask from next.
type LogRange struct {
	Start int64 `json:"start"`
	End   int64 `json:"end"`
}

// A session stream is a WebSocket between the portal and the agent.
// Binary messages carry bytes: from the portal, the session's input; from
// the agent, its output, the first byte saying which (StreamStdout or
// StreamStderr). Text messages carry one SessionControl as JSON.
const (
	StreamStdout byte = 1
	StreamStderr byte = 2
)

// SessionControl is a control message on a session stream. From the
// portal: Resize, Signal, EOF (no more input). From the agent: Exit (the
// command ended; the stream closes after it), Error (it could not start).
type SessionControl struct {
	Resize *TTY   `json:"resize,omitempty"`
	Signal string `json:"signal,omitempty"` // INT, TERM, HUP, KILL, QUIT, USR1, USR2
	EOF    bool   `json:"eof,omitempty"`
	Exit   *int   `json:"exit,omitempty"`
	Error  string `json:"error,omitempty"`
}

// SFTPHelperPath is where, inside every container, the agent mounts its
// static SFTP server (images such as busybox have none).
const SFTPHelperPath = "/.gpuportal/sftp-server"

// NewSessionID is a random session id (32 hex digits): the agent's stream
// names its session by it, so it must not be guessable.
func NewSessionID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b[:])
}

// MaxSessionEnv bounds the variables one session may set.
const MaxSessionEnv = 16

// SessionEnvAllowed says whether an SSH client may set a variable in its
// session (`SetEnv`, `SendEnv`): its locale (LANG, LANGUAGE, LC_*) and
// TERM, with a short printable value — as OpenSSH's default AcceptEnv
// takes. Nothing that changes what runs (PATH, LD_PRELOAD, the
// GPUPORTAL_ variables) is taken.
func SessionEnvAllowed(name, value string) bool {
	switch {
	case name == "LANG", name == "LANGUAGE", name == "TERM":
	case strings.HasPrefix(name, "LC_") && len(name) > 3 && strings.Trim(name[3:], "ABCDEFGHIJKLMNOPQRSTUVWXYZ_") == "":
	default:
		return false
	}
	if len(value) == 0 || len(value) > 128 {
		return false
	}
	for _, r := range value {
		if r < 0x20 || r > 0x7e {
			return false
		}
	}
	return true
}

// ForwardHost reads where a forwarded connection should go: "" for the
// instance's own loopback (localhost, 127.0.0.1, ::1), else an IP address
// or a host name as DNS has them; ok is false for anything else.
func ForwardHost(host string) (string, bool) {
	switch host {
	case "", "localhost", "127.0.0.1", "::1":
		return "", true
	}
	if len(host) > 253 {
		return "", false
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return host, true
	}
	for _, label := range strings.Split(strings.TrimSuffix(host, "."), ".") {
		if label == "" || len(label) > 63 || strings.Trim(label, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_") != "" ||
			strings.HasPrefix(label, "-") || strings.HasSuffix(label, "-") {
			return "", false
		}
	}
	return host, true
}
