package main

import (
	"errors"
	"fmt"
	"testing"

	"gpuportal"
)

// A command prints a refusal's message, and any other error with its
// cause (it used to print "Internal error." for those).
func TestCLIErrorKeepsTheCause(t *testing.T) {
	refusal := gpuportal.FieldErrorf(gpuportal.EINVALID, "region", "Unknown region %q.", "mars")
	if got := cliError(fmt.Errorf("enroll: %w", refusal)).Error(); got != `Unknown region "mars".` {
		t.Errorf("refusal = %q", got)
	}
	cause := errors.New("open data/portal.db: permission denied")
	if got := cliError(cause).Error(); got != cause.Error() {
		t.Errorf("cause = %q", got)
	}
}
