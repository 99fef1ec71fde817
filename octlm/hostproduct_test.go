package octlm

import (
	"fmt"
	"math"
	"testing"

	"github.com/gomlx/compute"

	"github.com/octlm/octlm/internal/hostproduct"
	"github.com/octlm/octlm/xla"
)

// TestHostProductsDecodeAsCompute decodes each fixture greedily, one sequence, then 16 at once
// (the most sequences measured in Go, four rows at a time, after a prompt of 64 rows), its
// weights in pieces of panels 16 and 64 columns wide (the fixtures' own are too small for
// pieces), on the pure-Go backend as octlm opens it, where each step's products by panels run in Go (internal/hostproduct), and on the
// backend it wraps, where compute's kernels run them, and compares every step's logits.
func TestHostProductsDecodeAsCompute(t *testing.T) {
	wrapped := ownHostBackend(t)
	for _, tc := range []struct {
		name  string
		width int
		// tol is relative: the sums' order differs (compute's kernels sum 16 rows in another order
		// than 1 or 2: 3.6e-5 on a logit of 0.21 seen); Gated DeltaNet's recurrence carries it on.
		tol float64
	}{
		{"tiny-qwen3", 16, 5e-5}, {"tiny-qwen3", 64, 5e-5}, {"tiny-qwen3-untied", 64, 5e-5},
		{"tiny-qwen35", 16, 2e-4}, {"tiny-qwen35", 64, 2e-4},
	} {
		name := tc.name
		t.Run(fmt.Sprintf("%s/panels%d", name, tc.width), func(t *testing.T) {
			layout := piecesLayout()
			layout.PieceMACs = 8*64*tc.width + 1
			layout.PiecePanels = tc.width
			load := func(b compute.Backend) *Model {
				m, err := Load(fixtureDir(name), LoadOptions{Backend: b, DType: Float32, Layout: &layout})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(m.Close)
				return m
			}
			inGo, onCompute := load(wrapped), load(wrapped.Unwrap())
			if inGo.layout.HostRows != xla.HostRows() || onCompute.layout.HostRows != 0 {
				t.Fatalf("HostRows %d and %d, want %d and 0", inGo.layout.HostRows, onCompute.layout.HostRows, xla.HostRows())
			}
			attends := hostproduct.AttentionKernels() // xla.Open asks for attention in Go only then
			if inGo.layout.HostAttention != attends || onCompute.layout.HostAttention || inGo.layout.CacheLeft == attends {
				t.Fatalf("HostAttention %v (CacheLeft %v) and %v, want %v (%v) and false", inGo.layout.HostAttention, inGo.layout.CacheLeft, onCompute.layout.HostAttention, attends, !attends)
			}
			for _, batch := range []int{1, min(16, xla.HostRows())} {
				before, attended := wrapped.ProductsRun(), wrapped.AttentionsRun()
				got := decodeSteps(t, inGo, batch)
				if wrapped.ProductsRun() == before {
					t.Fatalf("batch %d: no product ran in Go", batch)
				}
				if ran := wrapped.AttentionsRun() > attended; ran != attends {
					t.Fatalf("batch %d: attention ran in Go: %v, want %v", batch, ran, attends)
				}
				want := decodeSteps(t, onCompute, batch)
				for s := range want {
					for i, w := range want[s] {
						if d := math.Abs(float64(got[s][i] - w)); d > tc.tol*(1+math.Abs(float64(w))) {
							t.Fatalf("batch %d step %d logit %d: %g in Go, %g on compute", batch, s, i, got[s][i], w)
						}
					}
				}
			}
		})
	}
}

// ownHostBackend is the pure-Go backend as xla.Open gives it (wrapped by hostproduct), wrapped
// anew for the test, so that its count of products run in Go is the test's own.
func ownHostBackend(t testing.TB) *hostproduct.Backend {
	t.Helper()
	opened, ok := goBackend(t).(*hostproduct.Backend)
	if !ok {
		t.Fatalf("xla.Open(%q) is %T, not wrapped by hostproduct", xla.Go, goBackend(t))
	}
	b, err := hostproduct.Wrap(opened.Unwrap(), opened.Options())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// computeAttentionBackend is the pure-Go backend wrapped as octlm opens it but for attention,
// which stays on compute's kernels: for the tests of the layouts Go's attention replaces
// (Layout.CacheLeft, HalfCacheProducts).
func computeAttentionBackend(t testing.TB) *hostproduct.Backend {
	t.Helper()
	opened := ownHostBackend(t) // not finalized: it shares goBackend's
	opts := opened.Options()
	opts.Attention = false
	b, err := hostproduct.Wrap(opened.Unwrap(), opts)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// decodeSteps prefills batch short prompts, then decodes each greedily for a few steps, and
// returns every step's logits (all sequences').
func decodeSteps(t *testing.T, m *Model, batch int) [][]float32 {
	t.Helper()
	caches := make([]*Cache, batch)
	seqs := make([][]int, batch)
	for i := range caches {
		c, err := m.NewCache(32)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		caches[i] = c
		seqs[i] = []int{3 + i, 17, 42 + 5*i, 9}
	}
	if _, err := m.ForwardCachedBatch(seqs, caches); err != nil {
		t.Fatal(err)
	}
	next := make([][]int, batch)
	for i := range next {
		next[i] = []int{7 + i}
	}
	var steps [][]float32
	for range 4 {
		logits, err := m.NextBatch(next, caches)
		if err != nil {
			t.Fatal(err)
		}
		var all []float32
		for i, row := range logits {
			all = append(all, row...)
			best := 0
			for j, v := range row {
				if v > row[best] {
					best = j
				}
			}
			next[i] = []int{best}
		}
		steps = append(steps, all)
	}
	return steps
}
