package parity

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/octlm/octlm/octlm"
)

// TestProgressSameLogits: with Progress set, both paths run in slices of ProgressStep and give
// the same logits as one call, bit for bit, on a prompt long enough that the prefill's chunks
// shrink below ProgressStep; the positions reported grow to the total.
func TestProgressSameLogits(t *testing.T) {
	if testing.Short() {
		t.Skip("a 2,600-position prompt")
	}
	m := loadModel(t, "tiny-qwen3", octlm.Float32)
	rng := rand.New(rand.NewPCG(1, 2))
	ids := make([]int, 2600)
	for i := range ids {
		ids[i] = rng.IntN(m.Shape().Vocab)
	}
	for _, p := range []struct {
		name     string
		run      func(*octlm.Model, []int) (octlm.Logits, error)
		progress func(*octlm.Model, []int, func(done, total int)) (octlm.Logits, error)
	}{{PathFull, FullPath, fullPathProgress}, {PathCached, CachedPath, cachedPathProgress}} {
		want, err := p.run(m, ids)
		if err != nil {
			t.Fatal(err)
		}
		var done []int
		got, err := p.progress(m, ids, func(d, total int) {
			if total != len(ids) {
				t.Errorf("%s: total %d, want %d", p.name, total, len(ids))
			}
			done = append(done, d)
		})
		if err != nil {
			t.Fatal(err)
		}
		if got.Rows != want.Rows || !slices.Equal(got.Data, want.Data) {
			t.Errorf("%s path in slices: logits differ from one call", p.name)
		}
		if len(done) < 3 || !slices.IsSorted(done) || done[len(done)-1] != len(ids) {
			t.Errorf("%s path: positions reported %v", p.name, done)
		}
	}
}
