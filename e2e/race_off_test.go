//go:build !race

package e2e

// raceDetector reports whether the test binary runs under -race.
const raceDetector = false
