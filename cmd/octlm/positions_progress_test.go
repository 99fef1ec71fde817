package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/octlm/octlm/parity"
)

// TestPositionsLine: a long case's line shows positions done of total, then the rate and the
// time left, redrawn at most every 200 ms, and is erased when the path ends; a case of one
// slice draws nothing.
func TestPositionsLine(t *testing.T) {
	var out bytes.Buffer
	clock := time.Unix(0, 0)
	p := newPositionsLine(&out)
	p.now = func() time.Time { return clock }
	long := parity.Case{Index: 3}
	step := func(d time.Duration, c parity.Case, done, total int) string {
		clock = clock.Add(d)
		out.Reset()
		p.update(c, "full", done, total)
		return out.String()
	}
	if got := step(time.Second, parity.Case{Index: 0}, 900, 900); got != "" {
		t.Errorf("a short case drew %q", got)
	}
	if got, want := step(time.Second, long, 1024, 40960), "\r\x1b[Kcase 3, full path: 1,024 / 40,960 positions"; got != want {
		t.Errorf("first slice: %q, want %q", got, want)
	}
	if got := step(100*time.Millisecond, long, 2048, 40960); got != "" {
		t.Errorf("redrawn after 100 ms: %q", got)
	}
	// 2,048 more positions in 2 s since the first slice: 1,024/s, 37,888 left: 37 s.
	if got, want := step(1900*time.Millisecond, long, 3072, 40960), "\r\x1b[Kcase 3, full path: 3,072 / 40,960 positions, 1024 positions/s, about 37s left"; got != want {
		t.Errorf("later: %q, want %q", got, want)
	}
	if got := step(time.Second, long, 40960, 40960); got != "\r\x1b[K" {
		t.Errorf("the end of the path: %q, want the line erased", got)
	}
	if got := step(time.Second, parity.Case{Index: 3}, 1024, 40960); !strings.Contains(got, "case 3, full path: 1,024") {
		t.Errorf("the next path: %q", got)
	}
}
