package web

import (
	"sync"
	"time"

	"gpuportal"
)

// Login rate limits: failed attempts allowed per window before logins are
// refused with 429. Per account, against guessing one user's password; per
// IP, against trying many accounts from one place.
const (
	loginWindow         = 15 * time.Minute
	loginFailsPerUser   = 5
	loginFailsPerIP     = 20
	limiterSweepEvery   = 1024
	limiterMaxTrackedIP = 100_000
)

// loginLimiter counts failed logins in a sliding window, in memory and in
// real time (moving the business clock must not unlock accounts).
type loginLimiter struct {
	clock gpuportal.Clock
	mu    sync.Mutex
	fails map[string][]time.Time
	calls int
}

func newLoginLimiter(clock gpuportal.Clock) *loginLimiter {
	return &loginLimiter{clock: clock, fails: map[string][]time.Time{}}
}

// check returns a rate_limited error when the IP or the account has failed
// too often recently.
func (l *loginLimiter) check(ip, email string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock.Now()
	for _, k := range []struct {
		key   string
		limit int
	}{{"ip:" + ip, loginFailsPerIP}, {"user:" + email, loginFailsPerUser}} {
		recent := l.recent(k.key, now)
		if len(recent) >= k.limit {
			wait := recent[0].Add(loginWindow).Sub(now)
			minutes := int(wait.Minutes()) + 1
			return gpuportal.Errorf(gpuportal.ERATELIMITED, "Too many failed login attempts. Please try again in %d minutes.", minutes)
		}
	}
	return nil
}

// fail records a failed attempt.
func (l *loginLimiter) fail(ip, email string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock.Now()
	for _, key := range []string{"ip:" + ip, "user:" + email} {
		l.fails[key] = append(l.recent(key, now), now)
	}
	l.calls++
	if l.calls%limiterSweepEvery == 0 || len(l.fails) > limiterMaxTrackedIP {
		for key := range l.fails {
			if len(l.recent(key, now)) == 0 {
				delete(l.fails, key)
			}
		}
	}
}

// succeed forgets an account's failures after a successful login.
func (l *loginLimiter) succeed(email string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.fails, "user:"+email)
}

func (l *loginLimiter) recent(key string, now time.Time) []time.Time {
	times := l.fails[key]
	i := 0
	for i < len(times) && now.Sub(times[i]) >= loginWindow {
		i++
	}
	times = times[i:]
	if len(times) == 0 {
		delete(l.fails, key)
		return nil
	}
	l.fails[key] = times
	return times
}
