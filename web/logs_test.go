package web

import (
	"net/http"
	"testing"

	"gpuportal"
	"gpuportal/store/storetest"
)

// (issue 48) An offset into a log that is not a whole number of bytes, 0
// or more, is 400 naming it, before any node is asked.
func TestLogOffsetIsChecked(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	storetest.AddFleet(t, e.db, "n", "cd-1", "a100-80g", 1, 8)
	_, tok := e.apiToken("alice@example.com", gpuportal.RoleCustomer)
	st, body := e.apiCall("POST", "/api/v1/instances", tok, `{"kind":"spot","model":"a100-80g","region":"cd-1","count":1}`)
	if st != http.StatusCreated {
		t.Fatalf("launch = %d %s", st, body)
	}
	for _, bad := range []string{"-1", "x", "1.5"} {
		if st, body := e.apiCall("GET", "/api/v1/instances/1/log?offset="+bad, tok, ""); !refusedNaming(st, body, "offset") {
			t.Errorf("offset %q = %d %s", bad, st, body)
		}
	}
}
