package octlm

import (
	"fmt"
	"testing"
)

// TestDecodeInPlace: decoding token by token on caches the host writes in place gives, at every
// step, the logits of the whole sequence run in one pass (which reads no cache), over 150
// positions that cross two cache growths (the blocks of 64, 64 and 128 positions), for one
// sequence and for three ragged ones decoded together (each reading as many blocks as the
// furthest, its own slots past its length masked), both architectures, both engines, each with
// the cache's blocks multiplied on the left (Layout.CacheLeft, the values stored transposed) and
// on the right, whichever its own layout does.
func TestDecodeInPlace(t *testing.T) {
	t.Parallel()
	const total = 150
	for _, fixture := range []string{"tiny-qwen3", "tiny-qwen35"} {
		for _, engine := range []string{"go", "onnx"} {
			for _, left := range []bool{false, true} {
				name := fixture + "/" + engine + "/stored"
				if left {
					name = fixture + "/" + engine + "/left"
				}
				t.Run(name, func(t *testing.T) {
					backend := engineBackend(t, engine)
					layout := layoutOf(backend)
					layout.CacheLeft = left
					m := loadLayoutOn(t, backend, fixture, layout)
					for _, prompts := range [][]int{{5}, {3, 9, 70}} {
						t.Run(fmt.Sprint(len(prompts), "sequences"), func(t *testing.T) {
							decodeInPlace(t, m, prompts, total)
						})
					}
				})
			}
		}
	}
}

// decodeInPlace runs len(prompts) sequences of total tokens, each its prompt in one chunk and
// then one token a step (the sequences with tokens left batched together), on caches that start
// with room for one position, and checks every logit row against the whole sequence's Forward.
func decodeInPlace(t *testing.T, m *Model, prompts []int, total int) {
	vocab := m.Shape().Vocab
	seqs := make([][]int, len(prompts))
	want := make([]Logits, len(prompts))
	caches := make([]*Cache, len(prompts))
	for b := range seqs {
		seqs[b] = make([]int, total)
		for i := range seqs[b] {
			seqs[b][i] = (i*37 + b*101 + 11) % vocab
		}
		var err error
		if want[b], err = m.Forward(seqs[b]); err != nil {
			t.Fatal(err)
		}
		if caches[b], err = m.NewCache(1); err != nil {
			t.Fatal(err)
		}
		defer caches[b].Close()
	}
	worst := 0.0
	check := func(b, pos int, got []float32) {
		t.Helper()
		diff, scale := maxAbsDiff(got, want[b].Row(pos))
		worst = max(worst, diff/max(1, scale))
		if diff > 1e-4*max(1, scale) {
			t.Fatalf("sequence %d, position %d (cache capacity %d): decoded and whole differ by %.3g (max |logit| %.3g)", b, pos, caches[b].Capacity(), diff, scale)
		}
	}
	at := make([]int, len(prompts))
	for {
		var ids [][]int
		var active []int
		var cs []*Cache
		for b, seq := range seqs {
			if at[b] == len(seq) {
				continue
			}
			n := 1
			if at[b] == 0 {
				n = prompts[b]
			}
			ids = append(ids, seq[at[b]:at[b]+n])
			active = append(active, b)
			cs = append(cs, caches[b])
		}
		if len(active) == 0 {
			break
		}
		next, err := m.NextBatch(ids, cs)
		if err != nil {
			t.Fatal(err)
		}
		for i, b := range active {
			at[b] += len(ids[i])
			check(b, at[b]-1, next[i])
		}
	}
	for b, c := range caches {
		if c.Len() != total || c.Capacity() != 256 {
			t.Errorf("sequence %d: cache of %d positions, capacity %d, want %d in 256", b, c.Len(), c.Capacity(), total)
		}
	}
	t.Logf("worst difference %.3g of max(1, max |logit|)", worst)
}
