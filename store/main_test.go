package store_test

import (
	"testing"

	"gpuportal/store/storetest"
)

// The store's tests are its conformance suite: they run on SQLite and on
// PostgreSQL.
func TestMain(m *testing.M) { storetest.Main(m) }
