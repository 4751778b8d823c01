package e2e

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"gpuportal"
	"gpuportal/store"
	"gpuportal/store/storetest"

	_ "github.com/jackc/pgx/v5/stdlib"
)

// Several real portal processes on one PostgreSQL: bookings never overbook
// across them, one of them runs the scheduler and another takes over when
// it dies, and sessions work on any of them.

var (
	portalBinOnce sync.Once
	portalBin     string
	portalBinErr  error
)

// buildPortal builds the portal binary once, for the tests that run it as
// a process: as make builds it (pure Go), or with the flags the suite's
// test binaries were built with when GPUPORTAL_BUILD_FLAGS names them
// (make test: -race), so that its packages come out of the same build
// cache entries instead of being compiled a second time.
func buildPortal(t testing.TB) string {
	t.Helper()
	portalBinOnce.Do(func() {
		portalBin = filepath.Join(filepath.Dir(agentBin), "portal")
		args := []string{"build", "-o", portalBin}
		env := os.Environ()
		if flags := strings.Fields(os.Getenv("GPUPORTAL_BUILD_FLAGS")); len(flags) > 0 {
			args = append(args, flags...)
		} else {
			env = append(env, "CGO_ENABLED=0")
		}
		build := exec.Command("go", append(args, "gpuportal/cmd/portal")...)
		build.Env = env
		if out, err := build.CombinedOutput(); err != nil {
			portalBinErr = fmt.Errorf("build portal: %v\n%s", err, out)
		}
	})
	if portalBinErr != nil {
		t.Fatal(portalBinErr)
	}
	return portalBin
}

// testClockStart is where the portals' test clocks start: Tuesday
// 2026-12-01 09:30 in Shanghai.
var testClockStart = time.Date(2026, 12, 1, 1, 30, 0, 0, time.UTC)

const (
	pgAdminEmail    = "ops@example.com"
	pgAdminPassword = "ops-password-1"
)

// portalProc is a real portal process.
type portalProc struct {
	t     testing.TB
	cmd   *exec.Cmd
	url   string
	admin string // an admin's API token
	log   processLog
}

var listeningLine = regexp.MustCompile(`portal listening on (http://\S+)`)

// startPortalProc runs `portal serve` on dsn with a test clock at
// testClockStart; it is killed when the test ends.
func startPortalProc(t testing.TB, dsn string) *portalProc {
	return startPortalProcArgs(t, dsn, "127.0.0.1:0")
}

// startPortalProcArgs is startPortalProc listening on addr, with extra
// flags.
func startPortalProcArgs(t testing.TB, dsn, addr string, extra ...string) *portalProc {
	t.Helper()
	p := &portalProc{t: t}
	args := append([]string{"serve", "--addr", addr, "--db", dsn, "--test-clock", "--now", testClockStart.Format(time.RFC3339), "--timezone", "Asia/Shanghai"}, extra...)
	p.cmd = exec.Command(buildPortal(t), args...)
	p.cmd.Env = append(os.Environ(), "PORTAL_ADMIN_EMAIL="+pgAdminEmail, "PORTAL_ADMIN_PASSWORD="+pgAdminPassword, "PORTAL_LOG_LEVEL=info", "PORTAL_SSH_ADDR=127.0.0.1:0")
	stdout, _ := p.cmd.StdoutPipe()
	p.cmd.Stderr = &p.log
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.kill()
		switch {
		case strings.Contains(p.logText(), "WARNING: DATA RACE"): // built with -race (make test)
			t.Errorf("the race detector reported on portal %s:\n%s", p.url, p.logText())
		case t.Failed():
			t.Logf("portal %s log:\n%s", p.url, p.logText())
		}
	})
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := listeningLine.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			}
		}
	}()
	select {
	case p.url = <-found:
	case <-time.After(30 * time.Second):
		t.Fatalf("portal did not start:\n%s", p.logText())
	}
	p.admin = p.logIn(pgAdminEmail, pgAdminPassword)
	return p
}

func (p *portalProc) logText() string { return p.log.String() }

// kill ends the process at once (SIGKILL: no graceful shutdown).
func (p *portalProc) kill() {
	if p.cmd.ProcessState == nil {
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
	}
}

// procClient keeps connections to the portal processes alive between
// requests, as a load balancer would.
var procClient = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}

// call sends a JSON request and returns the status and body.
func (p *portalProc) call(method, path, token, body string) (int, string) {
	req, _ := http.NewRequest(method, p.url+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := procClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(raw)
}

func (p *portalProc) logIn(email, password string) string {
	p.t.Helper()
	st, body := p.call("POST", "/api/v1/auth/tokens", "", fmt.Sprintf(`{"email":%q,"password":%q,"name":"e2e"}`, email, password))
	var out struct{ Token string }
	if st != http.StatusCreated || json.Unmarshal([]byte(body), &out) != nil {
		p.t.Fatalf("log in %s at %s: %d %s", email, p.url, st, body)
	}
	return out.Token
}

// schedulerRole is "leader" or "standby", from /healthz.
func (p *portalProc) schedulerRole() string {
	st, body := p.call("GET", "/healthz", "", "")
	var h struct{ Scheduler, Database string }
	if st != http.StatusOK || json.Unmarshal([]byte(body), &h) != nil || h.Database != "postgres" {
		return ""
	}
	return h.Scheduler
}

// pgInstallation migrates a fresh PostgreSQL schema and gives it one node
// of 8 A100s and customers; it returns the URL and the customers' emails.
func pgInstallation(t testing.TB, customers int) (string, []string) {
	t.Helper()
	return installation(t, storetest.PostgresDSN(t), 1, customers)
}

// installation migrates the empty database at dsn and gives it nodes of 8
// A100s and customers; it returns dsn and the customers' emails.
func installation(t testing.TB, dsn string, nodes, customers int) (string, []string) {
	t.Helper()
	ctx := context.Background()
	db, err := store.Open(ctx, dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	storetest.AddFleet(t, db, "a", "cd-1", "a100-80g", nodes, 8)
	var emails []string
	for i := range customers {
		u := storetest.MustCreateUser(t, db, fmt.Sprintf("customer%d@example.com", i), gpuportal.RoleCustomer)
		emails = append(emails, u.Email)
	}
	return dsn, emails
}

func bookingBody(count int, start time.Time, hours int) string {
	return fmt.Sprintf(`{"model":"a100-80g","region":"cd-1","count":%d,"start":%q,"end":%q}`,
		count, start.Format(time.RFC3339), start.Add(time.Duration(hours)*time.Hour).Format(time.RFC3339))
}

// Two portal processes take concurrent bookings for one 8-GPU pool: no
// hour is ever over capacity, and every booking answered 201 is in the
// database as it was answered.
func TestTwoPortalsNeverOverbook(t *testing.T) {
	t.Parallel()
	dsn, emails := pgInstallation(t, 16)
	portals := []*portalProc{startPortalProc(t, dsn), startPortalProc(t, dsn)}

	first := testClockStart.Truncate(time.Hour).Add(3 * time.Hour)
	type booked struct {
		id     int64
		count  int
		start  time.Time
		hours  int
		portal int
	}
	var (
		mu      sync.Mutex
		created []booked
		refused int
		wg      sync.WaitGroup
	)
	for w, email := range emails {
		p := portals[w%2]
		token := p.logIn(email, storetest.Password)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 12 {
				count, start, hours := 1+(w+i)%3, first.Add(time.Duration((w*7+i*5)%8)*time.Hour), 4+(w+i)%3
				st, body := p.call("POST", "/api/v1/reservations", token, bookingBody(count, start, hours))
				mu.Lock()
				switch st {
				case http.StatusCreated:
					var r struct{ ID int64 }
					if err := json.Unmarshal([]byte(body), &r); err != nil || r.ID == 0 {
						t.Errorf("201 without an id: %s", body)
					}
					created = append(created, booked{r.ID, count, start, hours, w % 2})
				case http.StatusConflict:
					if !strings.Contains(body, "capacity_unavailable") {
						t.Errorf("409 for another reason: %s", body)
					}
					refused++
				default:
					t.Errorf("booking answered %d: %s", st, body)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	perPortal := [2]int{}
	for _, b := range created {
		perPortal[b.portal]++
	}
	t.Logf("%d bookings confirmed (%d on the first portal, %d on the second), %d refused for capacity", len(created), perPortal[0], perPortal[1], refused)
	if perPortal[0] == 0 || perPortal[1] == 0 || refused == 0 {
		t.Fatalf("the pool was not contended from both portals: %v confirmed, %d refused", perPortal, refused)
	}

	raw, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	for _, b := range created {
		var count int
		var start, end int64
		var status string
		err := raw.QueryRow(`SELECT count, start_at, end_at, status FROM reservations WHERE id = $1`, b.id).Scan(&count, &start, &end, &status)
		if err != nil || count != b.count || start != b.start.Unix() || end != b.start.Add(time.Duration(b.hours)*time.Hour).Unix() || status != "confirmed" {
			t.Errorf("reservation %d answered 201 is %d × %d–%d %s (%v); want %+v", b.id, count, start, end, status, err, b)
		}
	}
	var stored int
	raw.QueryRow(`SELECT count(*) FROM reservations`).Scan(&stored)
	if stored != len(created) {
		t.Errorf("%d reservations stored, %d answered 201", stored, len(created))
	}
	for h := first; h.Before(first.Add(16 * time.Hour)); h = h.Add(time.Hour) {
		var booked, usage int
		raw.QueryRow(`SELECT coalesce(sum(count), 0) FROM reservations WHERE status = 'confirmed' AND start_at <= $1 AND end_at > $1`, h.Unix()).Scan(&booked)
		raw.QueryRow(`SELECT coalesce(sum(reserved), 0) FROM hourly_usage WHERE hour = $1`, h.Unix()).Scan(&usage)
		if booked > 8 || usage != booked {
			t.Errorf("hour %s: %d GPUs booked (usage says %d) of 8", h.Format(time.RFC3339), booked, usage)
		}
	}
}

// The portal running the scheduler is killed; another takes over within a
// minute, and a reservation that falls due after the kill starts on time
// (manual clock), with its reminder sent once.
func TestSchedulerTakeoverWhenLeaderDies(t *testing.T) {
	t.Parallel()
	dsn, emails := pgInstallation(t, 1)
	a := startPortalProc(t, dsn)
	eventually(t, 10*time.Second, "the first portal to lead", func() bool { return a.schedulerRole() == "leader" })
	b := startPortalProc(t, dsn)
	if role := b.schedulerRole(); role != "standby" {
		t.Fatalf("second portal is %q; want standby while the first leads", role)
	}

	// Booked through the standby portal: due in 90 minutes, reminded an
	// hour before.
	start := testClockStart.Add(90 * time.Minute)
	token := b.logIn(emails[0], storetest.Password)
	st, body := b.call("POST", "/api/v1/reservations", token, bookingBody(4, start, 4))
	if st != http.StatusCreated {
		t.Fatalf("book: %d %s", st, body)
	}
	var r gpuportal.Reservation
	json.Unmarshal([]byte(body), &r)

	// The leader does what falls due before the kill: the reminder.
	if st, body := a.call("POST", "/api/v1/admin/clock", a.admin, fmt.Sprintf(`{"set":%q}`, start.Add(-50*time.Minute).Format(time.RFC3339))); st != 200 {
		t.Fatalf("move the leader's clock: %d %s", st, body)
	}
	a.kill()
	killed := time.Now()
	eventually(t, time.Minute, "the standby portal to take over", func() bool { return b.schedulerRole() == "leader" })
	t.Logf("took over %.1f s after the kill", time.Since(killed).Seconds())

	reservation := func() gpuportal.Reservation {
		var got gpuportal.Reservation
		st, body := b.call("GET", fmt.Sprintf("/api/v1/reservations/%d", r.ID), token, "")
		if st != 200 || json.Unmarshal([]byte(body), &got) != nil {
			t.Fatalf("GET reservation: %d %s", st, body)
		}
		return got
	}
	advance := func(to time.Time) {
		t.Helper()
		if st, body := b.call("POST", "/api/v1/admin/clock", b.admin, fmt.Sprintf(`{"set":%q}`, to.Format(time.RFC3339))); st != 200 {
			t.Fatalf("move the new leader's clock: %d %s", st, body)
		}
	}
	advance(start.Add(-time.Minute))
	if got := reservation(); got.Status != gpuportal.ReservationConfirmed {
		t.Fatalf("a minute before its start the reservation is %q", got.Status)
	}
	advance(start)
	if got := reservation(); got.Status != gpuportal.ReservationActive || len(got.GPUs) != 4 {
		t.Fatalf("at its start the reservation is %q with %d GPUs; want active with 4", got.Status, len(got.GPUs))
	}

	raw, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	var reminders int
	raw.QueryRow(`SELECT count(*) FROM notifications WHERE kind = 'reservation_starting' AND channel = 'app'`).Scan(&reminders)
	if reminders != 1 {
		t.Errorf("%d start reminders in the app; want exactly 1 across the hand-over", reminders)
	}
}

// A browser's session made on one portal works on another (the session
// keys live in the shared database).
func TestSessionWorksOnEveryPortal(t *testing.T) {
	t.Parallel()
	dsn, emails := pgInstallation(t, 1)
	a, b := startPortalProc(t, dsn), startPortalProc(t, dsn)
	jar, _ := cookiejar.New(nil)
	client := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	csrf := regexp.MustCompile(`name="_csrf" value="([^"]*)"`)

	resp, err := client.Get(a.url + "/login")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := csrf.FindSubmatch(page)
	if m == nil {
		t.Fatalf("no CSRF field on the login page:\n%s", page)
	}
	resp, err = client.PostForm(a.url+"/login", url.Values{"_csrf": {string(m[1])}, "email": {emails[0]}, "password": {storetest.Password}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("log in on the first portal: %d", resp.StatusCode)
	}
	// The cookie set by a, sent to b (same host, another port: cookies are
	// per host, as behind one load balancer).
	resp, err = client.Get(b.url + "/reservations")
	if err != nil {
		t.Fatal(err)
	}
	page, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(page), emails[0]) {
		t.Fatalf("the session from the first portal on the second: %d\n%.500s", resp.StatusCode, page)
	}
}

// An agent long-polls one portal while a customer launches and stops an
// instance on another: the wake-up crosses portals (LISTEN/NOTIFY), so the
// agent acts at once, not at its next 30 s heartbeat.
func TestAgentWakeupsCrossPortals(t *testing.T) {
	t.Parallel()
	dsn, emails := installation(t, storetest.PostgresDSN(t), 0, 1)
	a := startPortalProc(t, dsn)
	eventually(t, 10*time.Second, "the first portal to lead", func() bool { return a.schedulerRole() == "leader" })
	b := startPortalProc(t, dsn)

	st, body := a.call("POST", "/api/v1/admin/enrollment-tokens", a.admin, `{"region":"cd-1"}`)
	var enroll struct{ Token string }
	if st != http.StatusCreated || json.Unmarshal([]byte(body), &enroll) != nil {
		t.Fatalf("enrollment token: %d %s", st, body)
	}
	dir := t.TempDir()
	startAgentProc(t, b.url, enroll.Token, filepath.Join(dir, "node"), filepath.Join(dir, "ckpt"), "mock:dgxa100", "30s", "")
	// The agent's first long poll is under way once it has registered.
	time.Sleep(time.Second)

	token := a.logIn(emails[0], storetest.Password)
	instance := func(id int64) gpuportal.Instance {
		var i gpuportal.Instance
		st, body := a.call("GET", fmt.Sprintf("/api/v1/instances/%d", id), token, "")
		if st != http.StatusOK || json.Unmarshal([]byte(body), &i) != nil {
			t.Fatalf("GET instance: %d %s", st, body)
		}
		return i
	}
	launched := time.Now()
	st, body = a.call("POST", "/api/v1/instances", token, `{"kind":"on_demand","model":"a100-80g","region":"cd-1","count":2,"command":"sleep 600"}`)
	var inst gpuportal.Instance
	if st != http.StatusCreated || json.Unmarshal([]byte(body), &inst) != nil {
		t.Fatalf("launch: %d %s", st, body)
	}
	eventually(t, 10*time.Second, "the agent on the other portal to start the workload", func() bool {
		return instance(inst.ID).Status == gpuportal.InstanceRunning
	})
	t.Logf("running %.1f s after the launch", time.Since(launched).Seconds())

	stopped := time.Now()
	if st, body := a.call("POST", fmt.Sprintf("/api/v1/instances/%d/stop", inst.ID), token, ""); st != http.StatusOK {
		t.Fatalf("stop: %d %s", st, body)
	}
	eventually(t, 10*time.Second, "the agent on the other portal to stop the workload", func() bool {
		return instance(inst.ID).Status == gpuportal.InstanceStopped
	})
	t.Logf("stopped %.1f s after the request", time.Since(stopped).Seconds())
}
