package notify_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/http/httptest"
	netmail "net/mail"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"gpuportal"
	"gpuportal/notify"
	"gpuportal/store"
	"gpuportal/store/storetest"
)

// --- an in-process SMTP server ---

type mail struct {
	From string
	To   []string
	Data string
}

type mailbox struct {
	mu   sync.Mutex
	msgs []mail
}

func (b *mailbox) NewSession(*smtp.Conn) (smtp.Session, error) { return &session{box: b}, nil }

func (b *mailbox) all() []mail {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]mail(nil), b.msgs...)
}

// to returns the messages sent to addr.
func (b *mailbox) to(addr string) []mail {
	var out []mail
	for _, m := range b.all() {
		for _, t := range m.To {
			if t == addr {
				out = append(out, m)
			}
		}
	}
	return out
}

type session struct {
	box  *mailbox
	from string
	to   []string
}

func (s *session) Reset()        { s.from, s.to = "", nil }
func (s *session) Logout() error { return nil }
func (s *session) Mail(from string, _ *smtp.MailOptions) error {
	s.from = from
	return nil
}
func (s *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	s.to = append(s.to, to)
	return nil
}
func (s *session) Data(r io.Reader) error {
	raw, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	s.box.mu.Lock()
	s.box.msgs = append(s.box.msgs, mail{From: s.from, To: s.to, Data: string(raw)})
	s.box.mu.Unlock()
	return nil
}

// smtpServer listens on addr ("127.0.0.1:0" for any port) until stopped.
func smtpServer(t *testing.T, addr string, box *mailbox) (string, func()) {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	srv := smtp.NewServer(box)
	srv.Domain = "localhost"
	srv.AllowInsecureAuth = true
	go func() { _ = srv.Serve(l) }()
	var once sync.Once
	// Closing the listener too: Serve may not have taken it yet.
	stop := func() { once.Do(func() { srv.Close(); l.Close() }) }
	t.Cleanup(stop)
	return l.Addr().String(), stop
}

// --- an SMS gateway that checks signatures ---

type smsGateway struct {
	mu      sync.Mutex
	msgs    []map[string]string
	failing bool
	badSigs int
}

func (g *smsGateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	g.mu.Lock()
	defer g.mu.Unlock()
	if r.Header.Get("X-Signature") != notify.Sign("sms-secret", body) {
		g.badSigs++
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	if g.failing {
		http.Error(w, "gateway down", http.StatusInternalServerError)
		return
	}
	var m map[string]string
	_ = json.Unmarshal(body, &m)
	g.msgs = append(g.msgs, m)
}

func (g *smsGateway) to(phone string) []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []string
	for _, m := range g.msgs {
		if m["to"] == phone {
			out = append(out, m["text"])
		}
	}
	return out
}

// --- the world of a test ---

type world struct {
	t     *testing.T
	db    *store.DB
	clock *gpuportal.ManualClock
	wall  *gpuportal.ManualClock
	box   *mailbox
	sms   *smsGateway
	smtp  string
	disp  *notify.Dispatcher
	users map[string]*gpuportal.User
}

func newWorld(t *testing.T, gpus int) *world {
	t.Helper()
	db, clock := storetest.Open(t)
	wall := gpuportal.NewManualClock(storetest.Epoch)
	db.Wall = wall
	storetest.AddFleet(t, db, "n", "cd-1", "a100-80g", 1, gpus)
	w := &world{t: t, db: db, clock: clock, wall: wall, box: &mailbox{}, sms: &smsGateway{}, users: map[string]*gpuportal.User{}}
	w.smtp, _ = smtpServer(t, "127.0.0.1:0", w.box)
	gw := httptest.NewServer(w.sms)
	t.Cleanup(gw.Close)
	sender, err := notify.NewSMTPSender("smtp://" + w.smtp + "?from=noreply@gpuportal.example&tls=none")
	if err != nil {
		t.Fatal(err)
	}
	w.disp = &notify.Dispatcher{DB: db, Email: sender, SMS: &notify.SMSSender{URL: gw.URL, Secret: "sms-secret"}, Wall: wall,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), BaseURL: "https://portal.example", Location: storetest.Shanghai, Backoff: 10 * time.Second}
	for i, name := range []string{"alice", "bob", "carol", "dave", "eve", "zed"} {
		u, err := db.CreateUser(context.Background(), gpuportal.SignUp{Email: name + "@example.com", Password: storetest.Password, Name: name,
			Phone: "+861380013800" + string(rune('0'+i))}, gpuportal.RoleCustomer, "")
		if err != nil {
			t.Fatal(err)
		}
		// Money for what they book (the notifications are the subject here),
		// and their addresses verified (verification is tested on its own).
		if _, err := db.Credit(context.Background(), nil, u.ID, gpuportal.CreditRequest{Amount: storetest.TestBalance, Note: "test balance"}); err != nil {
			t.Fatal(err)
		}
		if err := db.SetContactsVerified(context.Background(), u.ID); err != nil {
			t.Fatal(err)
		}
		w.users[name] = u
	}
	db.Channels = map[string]bool{gpuportal.ChannelEmail: true, gpuportal.ChannelSMS: true}
	return w
}

// The window everybody wants: Wednesday 10:00–14:00 Shanghai.
var winStart = time.Date(2026, 12, 2, 10, 0, 0, 0, storetest.Shanghai)

func (w *world) req(count int) gpuportal.BookingRequest {
	return gpuportal.BookingRequest{Model: "a100-80g", Region: "cd-1", Count: count, Start: winStart, End: winStart.Add(4 * time.Hour)}
}

func (w *world) book(who string, count int) *gpuportal.Reservation {
	w.t.Helper()
	r, err := w.db.Book(context.Background(), w.users[who], w.req(count))
	if err != nil {
		w.t.Fatalf("%s books %d: %v", who, count, err)
	}
	return r
}

func (w *world) join(who string, count int, auto bool) *gpuportal.WaitlistEntry {
	w.t.Helper()
	e, err := w.db.JoinWaitlist(context.Background(), w.users[who], w.req(count), auto)
	if err != nil {
		w.t.Fatal(err)
	}
	return e
}

func (w *world) tick() {
	w.t.Helper()
	if _, err := w.db.Tick(context.Background(), w.clock.Now()); err != nil {
		w.t.Fatal(err)
	}
}

func (w *world) dispatch() int {
	w.t.Helper()
	n, err := w.disp.DispatchOnce(context.Background())
	if err != nil {
		w.t.Fatal(err)
	}
	return n
}

func (w *world) entry(who string, id int64) *gpuportal.WaitlistEntry {
	w.t.Helper()
	list, _ := w.db.Waitlist(context.Background(), w.users[who])
	for _, e := range list {
		if e.ID == id {
			return &e
		}
	}
	w.t.Fatalf("no entry %d for %s", id, who)
	return nil
}

func subjectOf(m mail) string {
	msg, err := netmail.ReadMessage(strings.NewReader(m.Data))
	if err != nil {
		return ""
	}
	s, err := new(mime.WordDecoder).DecodeHeader(msg.Header.Get("Subject"))
	if err != nil {
		return ""
	}
	return s
}

// A cancellation frees capacity: the first waiter that fits is offered it
// by email and SMS with the right expiry; the offer expires and passes to
// the next; a claim confirms (email with .ics); an auto_book entry is
// booked at once.
func TestWaitlistOfferExpireClaimAutoBook(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, 8)
	alice := w.book("alice", 4)
	zed := w.book("zed", 4)
	bob := w.join("bob", 4, false)
	carol := w.join("carol", 4, false)
	dave := w.join("dave", 4, true)
	if bob.Position != 1 || carol.Position != 2 || dave.Position != 3 {
		t.Fatalf("positions %d %d %d", bob.Position, carol.Position, dave.Position)
	}
	w.tick()
	if e := w.entry("bob", bob.ID); e.Status != gpuportal.WaitWaiting {
		t.Fatalf("bob offered a full window: %s", e.Status)
	}
	w.dispatch()
	for _, m := range w.box.all() { // only the booking confirmations so far
		if !strings.Contains(subjectOf(m), "Booking confirmed") {
			t.Fatalf("unexpected mail %q", subjectOf(m))
		}
	}

	// Alice cancels (free: > 24 h ahead): 4 GPUs free; Bob is offered them.
	if _, err := w.db.Cancel(ctx, w.users["alice"], alice.ID); err != nil {
		t.Fatal(err)
	}
	w.tick()
	e := w.entry("bob", bob.ID)
	if e.Status != gpuportal.WaitOffered || !e.OfferExpiresAt.Equal(storetest.Epoch.Add(30*time.Minute)) {
		t.Fatalf("bob = %+v", e)
	}
	if st := w.entry("carol", carol.ID).Status; st != gpuportal.WaitWaiting {
		t.Fatalf("carol = %s; only 4 GPUs freed", st)
	}
	// The held capacity cannot be booked by someone else.
	if _, err := w.db.Book(ctx, w.users["eve"], w.req(1)); gpuportal.ErrorCode(err) != gpuportal.ECAPACITY {
		t.Fatalf("eve booking held capacity: %v", err)
	}
	w.dispatch()
	offer := w.box.to("bob@example.com")
	if len(offer) != 1 || subjectOf(offer[0]) != "GPUs are free for your waitlist request" ||
		!strings.Contains(offer[0].Data, "held for you until 2026-11-30 08:30") || !strings.Contains(offer[0].Data, "https://portal.example/waitlist") {
		t.Fatalf("bob's offer mail: %+v", offer)
	}
	if sms := w.sms.to(w.users["bob"].Phone); len(sms) != 1 || !strings.Contains(sms[0], "until 2026-11-30 08:30") || len(sms[0]) > 160 {
		t.Fatalf("bob's SMS: %q", sms)
	}

	// 30 minutes later the offer expires and passes to Carol.
	w.clock.Set(storetest.Epoch.Add(30 * time.Minute))
	w.tick()
	if st := w.entry("bob", bob.ID).Status; st != gpuportal.WaitExpired {
		t.Fatalf("bob after 30 min = %s", st)
	}
	if st := w.entry("carol", carol.ID).Status; st != gpuportal.WaitOffered {
		t.Fatalf("carol = %s", st)
	}
	w.dispatch()
	if m := w.box.to("bob@example.com"); len(m) != 2 || !strings.Contains(subjectOf(m[1]), "expired") {
		t.Fatalf("bob's expiry mail: %d messages", len(m))
	}
	if _, err := w.db.ClaimOffer(ctx, w.users["bob"], bob.ID); gpuportal.ErrorCode(err) != gpuportal.EGONE {
		t.Fatalf("bob claiming an expired offer: %v", err)
	}
	// Carol claims: confirmed, and her confirmation carries the .ics.
	res, err := w.db.ClaimOffer(ctx, w.users["carol"], carol.ID)
	if err != nil || res.Status != gpuportal.ReservationConfirmed || res.Count != 4 {
		t.Fatalf("carol's claim = %+v, %v", res, err)
	}
	w.dispatch()
	cm := w.box.to("carol@example.com")
	if len(cm) != 2 || !strings.Contains(subjectOf(cm[1]), "Booking confirmed") || !strings.Contains(cm[1].Data, `filename="reservation-`+strconv.FormatInt(res.ID, 10)+`.ics"`) || !strings.Contains(cm[1].Data, "text/calendar") {
		t.Fatalf("carol's mails: %d, last %q", len(cm), subjectOf(cm[len(cm)-1]))
	}

	// Zed cancels: Dave's auto_book entry is booked at once.
	if _, err := w.db.Cancel(ctx, w.users["zed"], zed.ID); err != nil {
		t.Fatal(err)
	}
	w.tick()
	d := w.entry("dave", dave.ID)
	if d.Status != gpuportal.WaitClaimed || d.ReservationID == nil {
		t.Fatalf("dave = %+v", d)
	}
	w.dispatch()
	subjects := []string{}
	for _, m := range w.box.to("dave@example.com") {
		subjects = append(subjects, subjectOf(m))
	}
	if len(subjects) != 2 || !strings.Contains(strings.Join(subjects, "|"), "Booked from the waitlist") {
		t.Fatalf("dave's mails: %v", subjects)
	}
	if w.sms.badSigs != 0 {
		t.Fatalf("%d SMS with bad signatures", w.sms.badSigs)
	}
}

// A waiter asking for more than freed is skipped; a later, smaller one who
// fits is offered (first fit).
func TestWaitlistFirstFit(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, 8)
	w.book("alice", 4)
	zed := w.book("zed", 4)
	big := w.join("bob", 6, false)
	small := w.join("carol", 2, false)
	if _, err := w.db.Cancel(ctx, w.users["zed"], zed.ID); err != nil {
		t.Fatal(err)
	}
	w.tick()
	if st := w.entry("bob", big.ID).Status; st != gpuportal.WaitWaiting {
		t.Fatalf("6-GPU waiter = %s", st)
	}
	if st := w.entry("carol", small.ID).Status; st != gpuportal.WaitOffered {
		t.Fatalf("2-GPU waiter = %s", st)
	}
	// 2 of the 4 freed GPUs are held for Carol: Eve gets 2, not 3.
	if _, err := w.db.Book(ctx, w.users["eve"], w.req(3)); gpuportal.ErrorCode(err) != gpuportal.ECAPACITY {
		t.Fatalf("eve booked into held capacity: %v", err)
	}
	if _, err := w.db.Book(ctx, w.users["eve"], w.req(2)); err != nil {
		t.Fatalf("eve booking the rest: %v", err)
	}
}

// Two users race: one claims her offer while others try to book the same
// freed hours. Nobody overbooks.
func TestClaimRaceNeverOverbooks(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, 8)
	alice := w.book("alice", 4)
	w.book("zed", 4)
	e := w.join("bob", 4, false)
	if _, err := w.db.Cancel(ctx, w.users["alice"], alice.ID); err != nil {
		t.Fatal(err)
	}
	w.tick()
	var wg sync.WaitGroup
	var claimErr error
	for i := 0; i < 9; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			if i == 0 {
				_, claimErr = w.db.ClaimOffer(ctx, w.users["bob"], e.ID)
				return
			}
			who := []string{"carol", "dave", "eve"}[i%3]
			_, _ = w.db.Book(ctx, w.users[who], w.req(1+i%4))
		}(i)
	}
	// Meanwhile Bob's offer may also be leaving the waitlist by a tick.
	wg.Wait()
	if claimErr != nil {
		t.Fatalf("the holder's claim failed: %v", claimErr)
	}
	slots, _ := w.db.Availability(ctx, "a100-80g", "cd-1", winStart, winStart.Add(4*time.Hour))
	for _, s := range slots {
		if s.Reserved > s.Capacity {
			t.Fatalf("hour %s: %d of %d", s.Start, s.Reserved, s.Capacity)
		}
		if s.Reserved != 8 {
			t.Fatalf("hour %s: %d reserved; want the 8 of Zed and Bob", s.Start, s.Reserved)
		}
	}
}

// SMTP down: the email is retried with backoff and delivered when the
// server is back. SMS 500: retried. Nothing is sent twice.
func TestDeliveryRetries(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, 8)
	// Take SMTP down (same address, nobody listening) and fail the SMS gateway.
	box := &mailbox{}
	addr, stop := smtpServer(t, "127.0.0.1:0", box)
	stop()
	sender, _ := notify.NewSMTPSender("smtp://" + addr + "?from=noreply@gpuportal.example&tls=none")
	w.disp.Email = sender
	w.sms.failing = true
	w.book("alice", 2)
	if n := w.dispatch(); n != 0 {
		out, _ := w.db.Outbox(ctx, "", 0)
		t.Fatalf("%d sent while everything is down: %+v", n, out)
	}
	out, _ := w.db.Outbox(ctx, "", 0)
	for _, n := range out {
		if n.Status != "pending" || n.Attempts != 1 || n.LastError == "" || !n.NextTry.Equal(w.wall.Now().Add(10*time.Second)) {
			t.Fatalf("after a failure: %+v", n)
		}
	}
	// Not yet due: nothing happens; then the second try backs off twice as long.
	w.wall.Advance(5 * time.Second)
	w.dispatch()
	w.wall.Advance(5 * time.Second)
	w.dispatch()
	out, _ = w.db.Outbox(ctx, "", 0)
	if out[0].Attempts != 2 || !out[0].NextTry.Equal(w.wall.Now().Add(20*time.Second)) {
		t.Fatalf("second failure: %+v", out[0])
	}
	// Both come back.
	smtpServer(t, addr, box)
	w.sms.failing = false
	w.wall.Advance(20 * time.Second)
	if n := w.dispatch(); n != 2 {
		t.Fatalf("%d delivered after recovery; want 2", n)
	}
	w.wall.Advance(time.Hour)
	w.dispatch()
	if got := len(box.to("alice@example.com")); got != 1 {
		t.Fatalf("alice got %d emails", got)
	}
	if got := len(w.sms.to(w.users["alice"].Phone)); got != 1 {
		t.Fatalf("alice got %d SMS", got)
	}
}

// Gives up after the bound, visibly; an admin resend delivers it.
func TestGiveUpAndResend(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, 8)
	w.disp.MaxAttempts = 3
	w.sms.failing = true
	w.db.Channels = map[string]bool{gpuportal.ChannelSMS: true}
	w.book("alice", 1)
	for i := 0; i < 5; i++ {
		w.dispatch()
		w.wall.Advance(time.Hour)
	}
	failed, _ := w.db.Outbox(ctx, "failed", 0)
	if len(failed) != 1 || failed[0].Attempts != 3 || !strings.Contains(failed[0].LastError, "500") {
		t.Fatalf("failed = %+v", failed)
	}
	admin := storetest.MustCreateUser(t, w.db, "admin@example.com", gpuportal.RoleAdmin)
	if err := w.db.Resend(ctx, w.users["bob"], failed[0].ID); gpuportal.ErrorCode(err) != gpuportal.EFORBIDDEN {
		t.Fatalf("customer resend: %v", err)
	}
	w.sms.failing = false
	if err := w.db.Resend(ctx, admin, failed[0].ID); err != nil {
		t.Fatal(err)
	}
	if n := w.dispatch(); n != 1 {
		t.Fatalf("resend delivered %d", n)
	}
}

// A dispatcher killed mid-way loses nothing and sends nothing twice; one
// that dies between sending and recording may resend exactly that message.
func TestKilledDispatcher(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, 64)
	w.db.Channels = map[string]bool{gpuportal.ChannelEmail: true}
	for i := 0; i < 10; i++ {
		if _, err := w.db.Book(ctx, w.users["alice"], gpuportal.BookingRequest{Model: "a100-80g", Region: "cd-1", Count: 1, Start: winStart.Add(time.Duration(i) * time.Hour), End: winStart.Add(time.Duration(i+4) * time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	// Killed between messages: a sender that kills the process (cancels the
	// dispatcher's context) after its 4th delivery is recorded.
	killCtx, kill := context.WithCancel(ctx)
	d := *w.disp
	d.Email = &killAfter{Sender: w.disp.Email, n: 4, kill: kill}
	_, _ = d.DispatchOnce(killCtx)
	// A new dispatcher (after a restart) finishes the job.
	w.wall.Advance(3 * time.Minute)
	w.dispatch()
	subjects := map[string]int{}
	for _, m := range w.box.all() {
		subjects[subjectOf(m)]++
	}
	if len(w.box.all()) != 10 || len(subjects) != 10 {
		t.Fatalf("%d emails delivered; want 10 (one each)", len(w.box.all()))
	}

	// Died between sending and recording: that one message may go twice.
	w.book("bob", 1)
	due, _ := w.db.DueNotifications(ctx, w.wall.Now(), 10)
	if len(due) != 1 {
		t.Fatalf("%d due", len(due))
	}
	if ok, _ := w.db.ClaimNotification(ctx, due[0].ID, w.wall.Now()); !ok {
		t.Fatal("claim failed")
	}
	if err := w.disp.Email.Send(ctx, due[0].Recipient, notify.Render(due[0], "en", "", storetest.Shanghai)); err != nil {
		t.Fatal(err)
	}
	// … crash. Nothing resends it before it is stale; then exactly once more.
	w.dispatch()
	w.wall.Advance(3 * time.Minute)
	w.dispatch()
	w.dispatch()
	if got := len(w.box.to("bob@example.com")); got != 2 {
		t.Fatalf("bob got %d; want the one in flight resent once", got)
	}
	if got := len(w.box.all()); got != 12 {
		t.Fatalf("%d emails in all; want 12", got)
	}
}

type killAfter struct {
	notify.Sender
	n, sent int
	kill    func()
}

// Send delivers n messages; asked for the next one, the process "dies":
// its context is cancelled and nothing more is sent or recorded.
func (k *killAfter) Send(ctx context.Context, to string, m notify.Message) error {
	if k.sent == k.n {
		k.kill()
		return errors.New("killed")
	}
	k.sent++
	return k.Sender.Send(ctx, to, m)
}
