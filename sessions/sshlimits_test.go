package sessions

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

type fakeNow struct {
	mu sync.Mutex
	t  time.Time
}

func (f *fakeNow) now() time.Time { f.mu.Lock(); defer f.mu.Unlock(); return f.t }
func (f *fakeNow) add(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.t = f.t.Add(d)
}

// (issue 44, item 12) The gateway's door counts per address, like the web
// login: failed logins past a burst close the address's new connections
// unread until its bucket refills, connections that have not logged in
// are capped (400 idle ones were held before), and so is the rate of new
// connections.
func TestGatewayLimitsEachAddress(t *testing.T) {
	backend := &fakeBackend{}
	g, err := NewGateway(context.Background(), NewHub(backend, "", nil), backend, nil)
	if err != nil {
		t.Fatal(err)
	}
	clock := &fakeNow{t: time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)}
	g.limits.now = clock.now
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = g.Serve(l) }()
	t.Cleanup(func() { _ = g.Close() })

	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	signer, _ := ssh.NewSignerFromKey(priv)
	dial := func(user string) error {
		c, err := ssh.Dial("tcp", l.Addr().String(), &ssh.ClientConfig{User: user, Auth: []ssh.AuthMethod{ssh.PublicKeys(signer)},
			HostKeyCallback: ssh.InsecureIgnoreHostKey(), Timeout: 10 * time.Second})
		if err == nil {
			c.Close()
		}
		return err
	}
	// The server ends its side of a handshake a moment after the client:
	// a phase starts once every earlier one is over.
	handshakesOver := func() {
		t.Helper()
		waitFor(t, func() bool {
			g.limits.mu.Lock()
			defer g.limits.mu.Unlock()
			return g.limits.atDoor == 0
		})
	}
	refusedUnread := func(err error) bool { return err != nil && !strings.Contains(err.Error(), "unable to authenticate") }

	// Failed logins (no volume 1 for this key): a burst, then the door shuts.
	for k := range failBurst {
		if err := dial("volume-1"); err == nil || refusedUnread(err) {
			t.Fatalf("failed login %d: %v; want an authentication refusal", k+1, err)
		}
	}
	// The server counts a failure when the client has hung up: wait for
	// the last one to be counted.
	waitFor(t, func() bool {
		g.limits.mu.Lock()
		defer g.limits.mu.Unlock()
		return g.limits.addrs["127.0.0.1"].fails.TokensAt(clock.now()) < 1
	})
	if err := dial("volume-1"); !refusedUnread(err) {
		t.Fatalf("past %d failures: %v; want the connection closed unread", failBurst, err)
	}
	if err := dial("12"); !refusedUnread(err) {
		t.Fatalf("past the failures, a good login from the same address: %v; want it closed unread too", err)
	}
	clock.add(failEvery)
	if err := dial("12"); err != nil {
		t.Fatalf("once the bucket refilled: %v", err)
	}

	// Connections that never log in: handshakesPerAddr are served at
	// once, waitingPerAddr more wait for a turn, and past that they are
	// closed unread.
	clock.add(time.Hour)
	handshakesOver()
	var idle []net.Conn
	banner := func(c net.Conn, within time.Duration) bool {
		_ = c.SetReadDeadline(time.Now().Add(within))
		b := make([]byte, 7)
		n, _ := io.ReadFull(c, b)
		return n == 7 && string(b) == "SSH-2.0"
	}
	connect := func() net.Conn {
		c, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	for k := range handshakesPerAddr {
		c := connect()
		idle = append(idle, c)
		if !banner(c, 10*time.Second) {
			t.Fatalf("idle connection %d was not served", k+1)
		}
	}
	var waiting []net.Conn
	for range waitingPerAddr {
		waiting = append(waiting, connect())
	}
	waitFor(t, func() bool {
		g.limits.mu.Lock()
		defer g.limits.mu.Unlock()
		return g.limits.addrs["127.0.0.1"].inLine == handshakesPerAddr+waitingPerAddr
	})
	if c := connect(); banner(c, 10*time.Second) {
		t.Fatal("a connection past the line was served")
	}
	// One of those served leaves: one in line gets its turn, one only.
	idle[0].Close()
	got := map[int]bool{}
	poll := func() {
		for k, c := range waiting {
			if got[k] {
				continue
			}
			_ = c.SetReadDeadline(time.Now().Add(time.Millisecond))
			if n, _ := c.Read(make([]byte, 1)); n == 1 {
				got[k] = true
			}
		}
	}
	waitFor(t, func() bool { poll(); return len(got) > 0 })
	time.Sleep(100 * time.Millisecond) // room for a wrong second one to show
	if poll(); len(got) != 1 {
		t.Errorf("%d waiting connections were served for one that left", len(got))
	}
	for _, c := range append(idle[1:], waiting...) {
		c.Close()
	}

	// The rate of new connections: a burst, then one per connectEvery.
	clock.add(time.Hour)
	handshakesOver()
	for k := range connectBurst {
		if err := dial("12"); err != nil {
			t.Fatalf("connection %d of a burst: %v", k+1, err)
		}
	}
	if err := dial("12"); !refusedUnread(err) {
		t.Fatalf("past the burst: %v; want it closed unread", err)
	}
	clock.add(connectEvery)
	if err := dial("12"); err != nil {
		t.Fatalf("a second later: %v", err)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("the condition never held")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
