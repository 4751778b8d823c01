package web

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"gpuportal"
	"gpuportal/store/storetest"
)

// uploadBody is a multipart upload form: the CSRF field first (as the
// page's form sends it), then a file of size bytes, streamed.
func uploadBody(csrf string, size int64) (io.Reader, string) {
	var head bytes.Buffer
	mw := multipart.NewWriter(&head)
	if csrf != "" {
		_ = mw.WriteField(csrfField, csrf)
	}
	_, _ = mw.CreateFormFile("file", "big.bin")
	tail := "\r\n--" + mw.Boundary() + "--\r\n"
	file := io.LimitReader(zeros{}, size)
	return io.MultiReader(bytes.NewReader(head.Bytes()), file, strings.NewReader(tail)), mw.FormDataContentType()
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// (issue 44, item 4) An upload nobody is allowed to make leaves nothing
// on the portal's disk: before, the CSRF check parsed the multipart body
// (spooling its files to the temp dir) and the cleanup ran on another
// copy of the request, so a 40 MB POST with no login stayed there for
// good. Now no middleware parses a body: the token comes from a header
// or the form's first part, read by the handler before any file.
func TestRefusedUploadsLeaveNothingOnDisk(t *testing.T) {
	sqliteOnly(t, "what is tested is that no middleware reads a refused body: the temp dir, not the engine")
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp) // where a parsed form's files would go
	e := newTestEnv(t)
	e.web.hub.ConnectTimeout = 200 * time.Millisecond // no agent runs here
	storetest.AddFleet(t, e.db, "a", "cd-1", "a100-80g", 1, 8)
	_, alice := e.apiToken("alice@example.com", gpuportal.RoleCustomer)
	st, body := e.apiCall("POST", "/api/v1/volumes", alice, `{"name":"data","region":"cd-1","size_gib":100}`)
	if st != http.StatusCreated {
		t.Fatalf("create volume = %d %s", st, body)
	}
	id := int64(decodeObject(t, body)["id"].(float64))
	path := fmt.Sprintf("/volumes/%d/files?path=", id)
	leftovers := func(when string) {
		t.Helper()
		entries, _ := os.ReadDir(tmp)
		for _, en := range entries {
			t.Errorf("%s: %s left in the temp dir", when, en.Name())
		}
	}
	post := func(b *browser, csrf string, size int64) int {
		t.Helper()
		r, ctype := uploadBody(csrf, size)
		req, _ := http.NewRequest(http.MethodPost, b.base+path, r)
		req.Header.Set("Content-Type", ctype)
		return b.do(req).status
	}

	anon := e.browser()
	if st := post(anon, "", 40<<20); st != http.StatusForbidden && st != http.StatusUnauthorized {
		t.Errorf("an upload with no login = %d, want 403 or 401", st)
	}
	leftovers("no login")
	anon.get("/login") // an anonymous session with a token of its own
	if st := post(anon, anon.csrf, 40<<20); st != http.StatusUnauthorized && st != http.StatusSeeOther {
		t.Errorf("an upload with an anonymous session's token = %d, want 401", st)
	}
	leftovers("anonymous session")

	b := e.browser()
	b.login("alice@example.com", storetest.Password)
	if st := post(b, "not-the-token", 40<<20); st != http.StatusForbidden {
		t.Errorf("an upload with a wrong token = %d, want 403", st)
	}
	if st := post(b, "", 1<<20); st != http.StatusForbidden {
		t.Errorf("an upload with no token = %d, want 403", st)
	}
	leftovers("wrong token")
	// The right token gets past the check to the volume's files (no node
	// runs here to take them: 503, said on the page).
	if st := post(b, b.csrf, 1<<20); st != http.StatusServiceUnavailable {
		t.Errorf("an upload with the page's token = %d, want the no-node 503", st)
	}
	leftovers("a signed-in upload")
}

// (issue 44, item 9) Behind TLS the portal's session cookie is a __Host-
// cookie (Secure, this host alone, path /): no app under a shared parent
// domain can set or overwrite it. Over plain HTTP (the demo) it keeps its
// name.
func TestSessionCookieIsHostOnlyBehindTLS(t *testing.T) {
	t.Parallel()
	db, clock := storetest.Open(t)
	srv := httptest.NewUnstartedServer(nil)
	s, err := New(context.Background(), Config{PublicURL: "https://" + srv.Listener.Addr().String(), DB: db, Clock: clock, WallClock: gpuportal.RealClock{},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	srv.Config.Handler = s
	srv.StartTLS()
	t.Cleanup(srv.Close)
	resp, err := srv.Client().Get(srv.URL + "/login")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	set := resp.Header.Get("Set-Cookie")
	if !strings.HasPrefix(set, secureSessionCookie+"=") || !strings.Contains(set, "Secure") || !strings.Contains(set, "Path=/") || strings.Contains(strings.ToLower(set), "domain=") {
		t.Errorf("the session cookie behind TLS: %q", set)
	}
	plain := newTestEnv(t).browser()
	req, _ := http.NewRequest(http.MethodGet, plain.base+"/login", nil)
	resp, err = plain.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if set := resp.Header.Get("Set-Cookie"); !strings.HasPrefix(set, sessionCookie+"=") {
		t.Errorf("the session cookie over plain HTTP: %q", set)
	}
}

// (issue 44, item 7) A suspended volume is read-only: uploads and
// deletions are 402 with why (before any node is asked); reading stays.
func TestSuspendedVolumeRefusesWrites(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	e.web.hub.ConnectTimeout = 200 * time.Millisecond // no agent runs here
	storetest.AddFleet(t, e.db, "a", "cd-1", "a100-80g", 1, 8)
	ctx := context.Background()
	u := storetest.MustCreatePoorUser(t, e.db, "poor@example.com", gpuportal.RoleCustomer)
	if _, err := e.db.Credit(ctx, nil, u.ID, gpuportal.CreditRequest{Amount: 100, Note: "a little"}); err != nil {
		t.Fatal(err)
	}
	tok := e.tokenFor(u)
	st, body := e.apiCall("POST", "/api/v1/volumes", tok, `{"name":"data","region":"cd-1","size_gib":2000}`)
	if st != http.StatusCreated {
		t.Fatalf("create volume = %d %s", st, body)
	}
	id := int64(decodeObject(t, body)["id"].(float64))
	at := e.clock.Now().Add(2 * time.Hour)
	e.clock.Set(at)
	if _, err := e.db.Tick(ctx, at); err != nil {
		t.Fatal(err)
	}
	if _, body := e.apiCall("GET", fmt.Sprintf("/api/v1/volumes/%d", id), tok, ""); !strings.Contains(body, `"status":"suspended"`) {
		t.Fatalf("the volume is not suspended: %s", body)
	}
	if st, body := e.apiCall("PUT", fmt.Sprintf("/api/v1/volumes/%d/files/content?path=a.txt", id), tok, "hello"); st != http.StatusPaymentRequired || !strings.Contains(body, "read-only") {
		t.Errorf("an upload into a suspended volume = %d %s", st, body)
	}
	if st, body := e.apiCall("DELETE", fmt.Sprintf("/api/v1/volumes/%d/files?path=a.txt", id), tok, ""); st != http.StatusPaymentRequired {
		t.Errorf("a deletion in a suspended volume = %d %s", st, body)
	}
	// Reading goes to the node (none here: 503, not 402).
	if st, _ := e.apiCall("GET", fmt.Sprintf("/api/v1/volumes/%d/files", id), tok, ""); st != http.StatusServiceUnavailable {
		t.Errorf("listing a suspended volume = %d, want it to reach for the node", st)
	}
}
