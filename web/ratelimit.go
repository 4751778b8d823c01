package web

import (
	"strconv"
	"sync"
	"time"

	"gpuportal"
)

// Rate limits, in real time (moving the business clock must not unlock
// anything). Failed logins count per account and address (against guessing
// one user's password), per address (against trying many accounts from one
// place) and per account from everywhere (against guessing from many
// addresses; high enough that one address cannot lock anyone out, since
// its own limit stops it first). Sign-ups and token creations count every
// attempt per address.
const (
	loginWindow            = 15 * time.Minute
	loginFailsPerUser      = 5  // per account from one address
	loginFailsPerIP        = 20 // per address, any accounts
	loginFailsPerAccount   = 50 // per account, all addresses together
	signupWindow           = time.Hour
	signupsPerIP           = 10
	tokenWindow            = time.Hour
	tokenCreationsPerIP    = 30
	limiterSweepEvery      = 1024
	limiterMaxTrackedKeys  = 100_000
	limiterMaxEventsPerKey = 64
)

// limiter counts events per key in sliding windows, in memory. Its memory
// is bounded: at most maxKeys (limiterMaxTrackedKeys) keys of at most
// limiterMaxEventsPerKey times each; past that, keys are dropped (expired
// ones first, then arbitrary ones — a flood of invented keys must not
// grow the portal, and losing some counts only loosens limits briefly).
type limiter struct {
	clock  gpuportal.Clock
	mu     sync.Mutex
	events map[string][]time.Time
	calls  int
	// maxKeys is limiterMaxTrackedKeys; a test of the bound sets fewer
	// (filling 100,000 keys takes the race detector most of a minute).
	maxKeys int
}

func newLimiter(clock gpuportal.Clock) *limiter {
	return &limiter{clock: clock, events: map[string][]time.Time{}, maxKeys: limiterMaxTrackedKeys}
}

// rule is one limit: at most limit events of key within window.
type rule struct {
	key    string
	limit  int
	window time.Duration
}

// over returns the first rule already at its limit and how long until it
// frees, or ok.
func (l *limiter) over(rules ...rule) (wait time.Duration, blocked bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock.Now()
	for _, r := range rules {
		recent := l.recent(r.key, r.window, now)
		if len(recent) >= r.limit {
			return recent[len(recent)-r.limit].Add(r.window).Sub(now), true
		}
	}
	return 0, false
}

// record counts one event against every rule's key.
func (l *limiter) record(rules ...rule) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock.Now()
	for _, r := range rules {
		times := append(l.recent(r.key, r.window, now), now)
		if len(times) > limiterMaxEventsPerKey {
			times = times[len(times)-limiterMaxEventsPerKey:]
		}
		l.events[r.key] = times
	}
	l.calls++
	if l.calls%limiterSweepEvery == 0 || len(l.events) > l.maxKeys {
		l.sweep(now)
	}
}

// forget drops a key's events (an account's failures after it logs in).
func (l *limiter) forget(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.events, key)
}

// sweep drops keys with nothing recent, then arbitrary keys until a tenth
// of the room is free again (so that a flood sweeps once per many keys,
// not at every one).
func (l *limiter) sweep(now time.Time) {
	longest := max(loginWindow, signupWindow, tokenWindow)
	for key, times := range l.events {
		if len(times) == 0 || now.Sub(times[len(times)-1]) >= longest {
			delete(l.events, key)
		}
	}
	if len(l.events) <= l.maxKeys {
		return
	}
	for key := range l.events { // map order is random
		if len(l.events) <= l.maxKeys*9/10 {
			break
		}
		delete(l.events, key)
	}
}

func (l *limiter) recent(key string, window time.Duration, now time.Time) []time.Time {
	times := l.events[key]
	i := 0
	for i < len(times) && now.Sub(times[i]) >= window {
		i++
	}
	if i == len(times) {
		delete(l.events, key)
		return nil
	}
	return times[i:]
}

func loginRules(ip, email string) []rule {
	return []rule{
		{"login-ip:" + ip, loginFailsPerIP, loginWindow},
		{"login-user-ip:" + email + "\x00" + ip, loginFailsPerUser, loginWindow},
		{"login-user:" + email, loginFailsPerAccount, loginWindow},
	}
}

// minutesLeft rounds a wait up to whole minutes for messages.
func minutesLeft(wait time.Duration) int { return int(wait.Minutes()) + 1 }

// checkLoginAllowed refuses a login attempt while its address or account
// is over a limit of failures.
func (l *limiter) checkLoginAllowed(ip, email string) error {
	if wait, blocked := l.over(loginRules(ip, email)...); blocked {
		return gpuportal.Errorf(gpuportal.ERATELIMITED, "Too many failed login attempts. Please try again in %d minutes.", minutesLeft(wait))
	}
	return nil
}

func (l *limiter) loginFailed(ip, email string) { l.record(loginRules(ip, email)...) }

// loginSucceeded forgets the account's failures from this address.
func (l *limiter) loginSucceeded(ip, email string) { l.forget("login-user-ip:" + email + "\x00" + ip) }

// attempt counts one attempt of an action limited per address (sign-up,
// token creation); blocked means the address is over the limit and the
// attempt was not counted.
func (l *limiter) attempt(r rule) (wait time.Duration, blocked bool) {
	if wait, blocked := l.over(r); blocked {
		return wait, true
	}
	l.record(r)
	return 0, false
}

func signupRule(ip string) rule { return rule{"signup:" + ip, signupsPerIP, signupWindow} }

// jobsPerHour is how many jobs one user may submit an hour.
const jobsPerHour = 60

func jobRule(userID int64) rule {
	return rule{"job:" + strconv.FormatInt(userID, 10), jobsPerHour, time.Hour}
}

func tokenRule(ip string) rule { return rule{"token:" + ip, tokenCreationsPerIP, tokenWindow} }
