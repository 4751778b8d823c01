package store_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"gpuportal"
	"gpuportal/store/storetest"
)

// (issue 29, item 8) A write that fails for an internal reason says which
// write it was, and keeps its cause for errors.Is; a refusal comes back as
// it was made, its message the user's own.
func TestWriteErrorsNameTheWrite(t *testing.T) {
	t.Parallel()
	db, _ := storetest.Open(t)
	u := storetest.MustCreateUser(t, db, "alice@example.com", gpuportal.RoleCustomer)
	if _, err := db.AddSSHKey(t.Context(), u, "laptop", testKey); err != nil {
		t.Fatal(err)
	}

	_, err := db.AddSSHKey(t.Context(), u, "laptop again", testKey)
	if _, asMade := err.(*gpuportal.Error); !asMade || gpuportal.ErrorCode(err) != gpuportal.ECONFLICT {
		t.Errorf("the same key twice: %v (code %s); want the refusal unchanged", err, gpuportal.ErrorCode(err))
	}

	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	_, err = db.AddSSHKey(cancelled, u, "desktop", strings.Replace(testKey, "test@example", "desktop", 1))
	if err == nil || !strings.HasPrefix(err.Error(), "add SSH key: ") || !errors.Is(err, context.Canceled) || gpuportal.ErrorCode(err) != gpuportal.EINTERNAL {
		t.Errorf("a write that could not run: %v; want it named \"add SSH key\", internal, its cause kept", err)
	}
}
