package web

import (
	"testing"

	"gpuportal/store/storetest"
)

// The HTTP suite runs on SQLite and on PostgreSQL: what a user sees must
// not depend on the engine.
func TestMain(m *testing.M) { storetest.Main(m) }
