//go:build !race

package octlm

// raceEnabled reports whether the test binary runs under the race detector.
const raceEnabled = false
