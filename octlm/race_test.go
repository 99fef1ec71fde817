//go:build race

package octlm

import "testing"

// raceEnabled reports whether the test binary runs under the race detector.
const raceEnabled = true

// skipNumericsUnderRace skips a test that only compares numbers (gradients, parity on both
// engines, an adapter's logits): the plain run covers it, and under the race detector, which is
// for the buffers, caches and goroutines that tests like TestBatchMatchesAlone exercise, it
// would take most of CI's race step.
func skipNumericsUnderRace(t *testing.T) {
	t.Helper()
	t.Skip("numerical comparison: covered by the run without -race")
}
