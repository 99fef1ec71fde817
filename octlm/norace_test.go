//go:build !race

package octlm

import "testing"

// raceEnabled reports whether the test binary runs under the race detector.
const raceEnabled = false

// skipNumericsUnderRace does nothing without the race detector (see race_test.go).
func skipNumericsUnderRace(t *testing.T) { t.Helper() }
