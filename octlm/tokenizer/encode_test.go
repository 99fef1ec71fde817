package tokenizer

import (
	"fmt"
	"testing"
)

func firstDiff(a, b []int) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	return -1
}

func TestCorpus(t *testing.T) {
	tok := qwen(t)
	texts, want := corpus(t)
	if len(texts) != 1046 {
		t.Errorf("corpus has %d lines, want 1046", len(texts))
	}
	failed := 0
	for i, s := range texts {
		got := tok.Encode(s)
		d := firstDiff(got, want[i])
		if d < 0 {
			continue
		}
		failed++
		if failed <= 30 {
			ctx := func(ids []int) string {
				lo, hi := max(0, d-3), min(len(ids), d+4)
				return fmt.Sprint(ids[lo:hi])
			}
			short := s
			if len(short) > 80 {
				short = short[:80] + "..."
			}
			t.Errorf("line %d %+q: first difference at token %d: got %s, want %s (lengths %d, %d)",
				i+1, short, d, ctx(got), ctx(want[i]), len(got), len(want[i]))
		}
	}
	if failed > 0 {
		t.Errorf("%d of %d corpus lines differ", failed, len(texts))
	}
}
