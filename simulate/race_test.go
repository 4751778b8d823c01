//go:build race

package simulate

// raceDetector says the tests run under -race (make test's main run).
const raceDetector = true
