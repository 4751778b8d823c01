package sessions

import (
	"net"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// The gateway's door, per address, like the web login's limits (OpenSSH's
// MaxStartups and PerSourcePenalties do the same): an address fails to
// log in only so often before its new connections are closed unread
// until its bucket refills; it opens connections at a bounded rate; and
// it has only a few handshakes under way at once — more wait their turn
// (a lab behind one NAT opening a hundred sessions at once is served in
// turn), and past a bounded queue they are closed. Counts are in memory
// and bounded; an address's buckets refill by themselves.
const (
	handshakesPerAddr = 16   // handshakes of one address under way at once…
	waitingPerAddr    = 128  // …and waiting for their turn
	maxAtTheDoor      = 1024 // handshakes under way or waiting, all addresses
	connectBurst      = 200  // new connections of one address at once…
	connectEvery      = 50 * time.Millisecond
	failBurst         = 20 // failed logins of one address at once…
	failEvery         = 45 * time.Second
	maxTrackedAddrs   = 10_000
)

// doorLimits admits connections to the gateway.
type doorLimits struct {
	now func() time.Time

	mu      sync.Mutex
	atDoor  int // under way or waiting, all addresses
	addrs   map[string]*door
	closing chan struct{} // closed with the gateway: nobody waits on
}

type door struct {
	turns    chan struct{} // one token per handshake under way
	inLine   int           // under way or waiting
	connects *rate.Limiter
	fails    *rate.Limiter
}

func newDoorLimits(now func() time.Time) *doorLimits {
	return &doorLimits{now: now, addrs: map[string]*door{}, closing: make(chan struct{})}
}

// hostOf is a remote address without its port: the unit every limit
// counts.
func hostOf(addr net.Addr) string {
	if host, _, err := net.SplitHostPort(addr.String()); err == nil {
		return host
	}
	return addr.String()
}

// admit lets a new connection from host start its handshake once its
// turn comes (within wait), or refuses it at once; done must be called
// once the handshake is over, whatever its outcome.
func (l *doorLimits) admit(host string, wait time.Duration) (done func(), ok bool) {
	l.mu.Lock()
	now := l.now()
	d := l.door(host, now)
	if l.atDoor >= maxAtTheDoor || d.inLine >= handshakesPerAddr+waitingPerAddr || d.fails.TokensAt(now) < 1 || !d.connects.AllowN(now, 1) {
		l.mu.Unlock()
		return nil, false
	}
	l.atDoor++
	d.inLine++
	l.mu.Unlock()
	leave := func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.atDoor--
		d.inLine--
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case d.turns <- struct{}{}:
	case <-timer.C:
		leave()
		return nil, false
	case <-l.closing:
		leave()
		return nil, false
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			<-d.turns
			leave()
		})
	}, true
}

// failed counts a connection of host that did not log in.
func (l *doorLimits) failed(host string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	l.door(host, now).fails.AllowN(now, 1)
}

// close lets go of everyone waiting (the gateway closes).
func (l *doorLimits) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case <-l.closing:
	default:
		close(l.closing)
	}
}

// door is host's state, made on first sight. The map stays bounded: past
// maxTrackedAddrs, addresses with nobody in line and full buckets go
// (they would be made afresh just the same), and if that is not enough,
// any with nobody in line.
func (l *doorLimits) door(host string, now time.Time) *door {
	if d, ok := l.addrs[host]; ok {
		return d
	}
	if len(l.addrs) >= maxTrackedAddrs {
		for h, d := range l.addrs {
			if d.inLine == 0 && d.fails.TokensAt(now) >= failBurst && d.connects.TokensAt(now) >= connectBurst {
				delete(l.addrs, h)
			}
		}
		for h, d := range l.addrs {
			if len(l.addrs) < maxTrackedAddrs*9/10 {
				break
			}
			if d.inLine == 0 {
				delete(l.addrs, h)
			}
		}
	}
	// Buckets start full; rate.Limiter reads time only from the calls
	// (l.now), which tests move.
	d := &door{turns: make(chan struct{}, handshakesPerAddr),
		connects: rate.NewLimiter(rate.Every(connectEvery), connectBurst), fails: rate.NewLimiter(rate.Every(failEvery), failBurst)}
	l.addrs[host] = d
	return d
}
