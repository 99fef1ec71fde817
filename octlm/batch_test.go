package octlm

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/gomlx/compute"
)

// engineBackend is the test backend of an engine: "go" or "onnx" (skipped where ONNX Runtime is
// not installed).
func engineBackend(t *testing.T, engine string) compute.Backend {
	if engine == "onnx" {
		return onnxBackend(t)
	}
	return goBackend(t)
}

// TestBatchMatchesAlone: B sequences of different lengths run as one batch give the logits of
// each run alone, on the full path (ForwardBatch), on the cached path on top of caches holding
// prefixes of different lengths (ForwardCachedBatch) and decoding (NextBatch), for both
// architectures on both engines.
func TestBatchMatchesAlone(t *testing.T) {
	t.Parallel()
	seqs := [][]int{{5, 9, 2, 77, 31, 8, 8, 140, 3, 60, 11, 4, 4, 90, 1, 17, 23}, {12}, {3, 1, 4, 1, 5, 9, 2}, {250, 2, 71, 66}}
	prefixes := [][]int{{7, 7, 7}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20}, {}, {42}}
	for _, fixture := range []string{"tiny-qwen3", "tiny-qwen35"} {
		for _, engine := range []string{"go", "onnx"} {
			t.Run(fixture+"/"+engine, func(t *testing.T) {
				backend := engineBackend(t, engine)
				m, err := Load(fixtureDir(fixture), LoadOptions{Backend: backend})
				if err != nil {
					t.Fatal(err)
				}
				defer m.Close()
				check := func(path string, b int, got, want []float32) {
					t.Helper()
					if len(got) != len(want) {
						t.Fatalf("%s, sequence %d: %d logits, want %d", path, b, len(got), len(want))
					}
					diff, scale := maxAbsDiff(got, want)
					if diff > 1e-5*max(1, scale) {
						t.Errorf("%s, sequence %d: batch and alone differ by %.3g (max |logit| %.3g)", path, b, diff, scale)
					}
				}

				full, err := m.ForwardBatch(seqs)
				if err != nil {
					t.Fatal(err)
				}
				for b, ids := range seqs {
					want, err := m.Forward(ids)
					if err != nil {
						t.Fatal(err)
					}
					check("full", b, full[b].Data, want.Data)
				}

				// Cached: each sequence on top of its prefix, then three decoding steps.
				caches := make([]*Cache, len(seqs))
				alone := make([]*Cache, len(seqs))
				for b := range seqs {
					for _, cs := range []*[]*Cache{&caches, &alone} {
						c, err := m.NewCache(8)
						if err != nil {
							t.Fatal(err)
						}
						defer c.Close()
						if len(prefixes[b]) > 0 {
							if _, err := m.ForwardCached(prefixes[b], c); err != nil {
								t.Fatal(err)
							}
						}
						(*cs)[b] = c
					}
				}
				cached, err := m.ForwardCachedBatch(seqs, caches)
				if err != nil {
					t.Fatal(err)
				}
				for b, ids := range seqs {
					want, err := m.ForwardCached(ids, alone[b])
					if err != nil {
						t.Fatal(err)
					}
					check("cached", b, cached[b].Data, want.Data)
				}
				for step := range 3 {
					next := make([][]int, len(seqs))
					for b := range seqs {
						next[b] = []int{(b*31 + step*7) % 300}
					}
					got, err := m.NextBatch(next, caches)
					if err != nil {
						t.Fatal(err)
					}
					for b := range seqs {
						want, err := m.Next(next[b], alone[b])
						if err != nil {
							t.Fatal(err)
						}
						check("decode", b, got[b], want)
						if caches[b].Len() != alone[b].Len() {
							t.Errorf("decode, sequence %d: cache holds %d positions, alone %d", b, caches[b].Len(), alone[b].Len())
						}
					}
				}
			})
		}
	}
}

// TestBatchRefusals: a batch refuses shared caches, a cache of another model and a bad token,
// naming the sequence.
func TestBatchRefusals(t *testing.T) {
	t.Parallel()
	m := loadFixture(t, "tiny-qwen3", Float32)
	c, err := m.NewCache(8)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := m.ForwardCachedBatch([][]int{{1}, {2}}, []*Cache{c, c}); !errors.Is(err, ErrBadInput) {
		t.Errorf("a shared cache: %v, want ErrBadInput", err)
	}
	if _, err := m.ForwardBatch([][]int{{1}, {2, 100000}}); !errors.Is(err, ErrBadInput) {
		t.Errorf("a token outside the vocabulary: %v, want ErrBadInput", err)
	}
	if _, err := m.ForwardBatch(nil); !errors.Is(err, ErrBadInput) {
		t.Errorf("no sequences: %v, want ErrBadInput", err)
	}
}

// TestGenerateBatch: prompts generated as one batch give each one's Generate alone, greedy and
// sampled, with stop tokens ending some rows early.
func TestGenerateBatch(t *testing.T) {
	t.Parallel()
	prompts := [][]int{{5, 9, 2, 77, 31}, {12}, {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5}}
	for _, fixture := range []string{"tiny-qwen3", "tiny-qwen35"} {
		m := loadFixture(t, fixture, Float32)
		for _, tt := range []struct {
			name string
			opts GenerateOptions
		}{
			{"greedy", GenerateOptions{MaxNewTokens: 9, Sampling: Greedy()}},
			{"sampled", GenerateOptions{MaxNewTokens: 7, Sampling: Sampling{Temperature: 0.9, TopK: 20, TopP: 0.95, Seed: 7}}},
		} {
			t.Run(fixture+"/"+tt.name, func(t *testing.T) {
				opts := tt.opts
				// A stop token: the second token prompt 0 generates alone.
				alone0, err := m.Generate(prompts[0], opts)
				if err != nil {
					t.Fatal(err)
				}
				opts.StopIDs = []int{alone0.GeneratedIDs[1]}
				got, err := m.GenerateBatch(prompts, opts)
				if err != nil {
					t.Fatal(err)
				}
				for b, prompt := range prompts {
					want, err := m.Generate(prompt, opts)
					if err != nil {
						t.Fatal(err)
					}
					if !slices.Equal(got[b].GeneratedIDs, want.GeneratedIDs) || got[b].StopReason != want.StopReason {
						t.Errorf("prompt %d: batch generated %v (%s), alone %v (%s)", b, got[b].GeneratedIDs, got[b].StopReason, want.GeneratedIDs, want.StopReason)
					}
				}
				if got[0].StopReason != StopEOS {
					t.Errorf("prompt 0 stopped by %s, want %s", got[0].StopReason, StopEOS)
				}
			})
		}
	}
}

// TestBatchHalfCache: a float16 model's batch on caches holding prefixes of different lengths
// (ONNX Runtime writes a half-precision cache by one update slice per sequence) gives each
// sequence's logits alone.
func TestBatchHalfCache(t *testing.T) {
	t.Parallel()
	seqs := [][]int{{5, 9, 2, 77, 31}, {12, 4}, {3, 1, 4, 1, 5, 9, 2}}
	prefixes := [][]int{{7, 7, 7}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, {}}
	for _, engine := range []string{"go", "onnx"} {
		t.Run(engine, func(t *testing.T) {
			m, err := Load(fixtureDir("tiny-qwen3"), LoadOptions{Backend: engineBackend(t, engine), DType: Float16})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			var caches, alone []*Cache
			for b := range seqs {
				for _, cs := range []*[]*Cache{&caches, &alone} {
					c, err := m.NewCache(8)
					if err != nil {
						t.Fatal(err)
					}
					defer c.Close()
					if len(prefixes[b]) > 0 {
						if _, err := m.ForwardCached(prefixes[b], c); err != nil {
							t.Fatal(err)
						}
					}
					*cs = append(*cs, c)
				}
			}
			got, err := m.ForwardCachedBatch(seqs, caches)
			if err != nil {
				t.Fatal(err)
			}
			for b, ids := range seqs {
				want, err := m.ForwardCached(ids, alone[b])
				if err != nil {
					t.Fatal(err)
				}
				diff, scale := maxAbsDiff(got[b].Data, want.Data)
				t.Logf("sequence %d: batch vs alone %.3g (max |logit| %.3g)", b, diff, scale)
				if diff > 1e-3*max(1, scale) {
					t.Errorf("sequence %d: batch and alone differ by %.3g", b, diff)
				}
			}
		})
	}
}

// BenchmarkNextBatch times one decoding step of B sequences at once (NextBatch) on tiny-qwen3,
// each on a cache of 64 positions; tokens/s counts all B.
func BenchmarkNextBatch(b *testing.B) {
	m := loadFixture(b, "tiny-qwen3", Float32)
	for _, batch := range []int{1, 4, 16} {
		b.Run(fmt.Sprintf("B=%d", batch), func(b *testing.B) {
			caches := make([]*Cache, batch)
			next := make([][]int, batch)
			for i := range caches {
				c, err := m.NewCache(64 + b.N + 1)
				if err != nil {
					b.Fatal(err)
				}
				defer c.Close()
				if err := c.Pad(64); err != nil {
					b.Fatal(err)
				}
				caches[i], next[i] = c, []int{i + 1}
			}
			if _, err := m.NextBatch(next, caches); err != nil { // compile outside the timing
				b.Fatal(err)
			}
			b.ResetTimer()
			for range b.N {
				if _, err := m.NextBatch(next, caches); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(batch*b.N)/b.Elapsed().Seconds(), "tokens/s")
		})
	}
}

// TestNextInto: NextInto and NextBatchInto give Next's and NextBatch's logits step after step,
// written into the buffers given where they have the room (and into new ones where they do
// not), for both architectures.
func TestNextInto(t *testing.T) {
	t.Parallel()
	for _, fixture := range []string{"tiny-qwen3", "tiny-qwen35"} {
		t.Run(fixture, func(t *testing.T) {
			m := loadFixture(t, fixture, Float32)
			newCaches := func(n int) []*Cache {
				cs := make([]*Cache, n)
				for i := range cs {
					c, err := m.NewCache(64)
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(c.Close)
					cs[i] = c
				}
				return cs
			}
			plain, reused := newCaches(2), newCaches(2)
			seqs := [][]int{{5, 9, 2, 77}, {12, 3}}
			into := [][]float32{make([]float32, 1), nil} // too small, then none
			for step := range 4 {
				want, err := m.NextBatch(seqs, plain)
				if err != nil {
					t.Fatal(err)
				}
				before := slices.Clone(into)
				got, err := m.NextBatchInto(seqs, reused, into)
				if err != nil {
					t.Fatal(err)
				}
				for b := range want {
					if !slices.Equal(got[b], want[b]) {
						t.Fatalf("step %d, sequence %d: NextBatchInto's logits differ from NextBatch's", step, b)
					}
					roomy := cap(before[b]) >= len(want[b])
					if same := len(got[b]) > 0 && cap(before[b]) > 0 && &got[b][:1][0] == &before[b][:1][0]; same != roomy {
						t.Fatalf("step %d, sequence %d: written into the buffer given: %v, want %v (its room %d for %d)", step, b, same, roomy, cap(before[b]), len(want[b]))
					}
				}
				into = got
				for b := range seqs {
					seqs[b] = []int{Argmax(got[b])}
				}
			}
			// One sequence: NextInto as Next.
			c1, c2 := newCaches(1)[0], newCaches(1)[0]
			var buf []float32
			for step, ids := range [][]int{{4, 8, 15}, {16}, {23}} {
				want, err := m.Next(ids, c1)
				if err != nil {
					t.Fatal(err)
				}
				old := buf
				if buf, err = m.NextInto(ids, c2, buf); err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(buf, want) {
					t.Fatalf("step %d: NextInto's logits differ from Next's", step)
				}
				if step > 0 && &buf[0] != &old[0] {
					t.Fatalf("step %d: NextInto wrote into a new buffer, not the one given", step)
				}
			}
		})
	}
}
