package web

import (
	"testing"

	"gpuportal/internal/browsertest"
	"gpuportal/store/storetest"
)

// The HTTP suite runs on SQLite and on PostgreSQL: what a user sees must
// not depend on the engine. The browser tests share one Chromium, ended
// after both runs.
func TestMain(m *testing.M) { storetest.Main(m, browsertest.Close) }
