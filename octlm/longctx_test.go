package octlm

import (
	"fmt"
	"math"
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/octlm/octlm/internal/sysinfo"
	"github.com/octlm/octlm/octlm/synth"
)

// TestChunkedPrefill runs prompts in chunks of a few rows (the way long prompts run) and holds
// them to the reference and to the prompt in one chunk: full path, cached path and Next.
func TestChunkedPrefill(t *testing.T) {
	for _, name := range fixtures {
		m := loadFixture(t, name, Float32)
		cases := readReference(t, name)
		for _, rows := range []int{1, 4, 16} {
			t.Run(fmt.Sprint(name, "/", rows, " rows"), func(t *testing.T) {
				c := cases[len(cases)-1] // the longest
				whole, err := m.Forward(c.ids)
				if err != nil {
					t.Fatal(err)
				}
				m := loadChunked(t, name, rows)
				full, err := m.Forward(c.ids)
				if err != nil {
					t.Fatal(err)
				}
				cache, err := m.NewCache(1)
				if err != nil {
					t.Fatal(err)
				}
				defer cache.Close()
				split := len(c.ids) / 2
				first, err := m.ForwardCached(c.ids[:split], cache)
				if err != nil {
					t.Fatal(err)
				}
				last, err := m.Next(c.ids[split:], cache)
				if err != nil {
					t.Fatal(err)
				}
				for _, check := range []struct {
					what      string
					got, want Logits
					tolerance float64
				}{
					{"full path vs reference", full, c.logits, parityTolerance},
					{"full path vs one chunk", full, whole, 1e-4},
					{"cached first half vs one chunk", first, Logits{Rows: split, Vocab: whole.Vocab, Data: whole.Data[:split*whole.Vocab]}, 1e-4},
					{"Next vs one chunk", Logits{Rows: 1, Vocab: whole.Vocab, Data: last}, Logits{Rows: 1, Vocab: whole.Vocab, Data: whole.Row(whole.Rows - 1)}, 1e-4},
				} {
					if d := maxAbsError(t, check.got, check.want); d > check.tolerance {
						t.Errorf("%s: max abs error %g > %g", check.what, d, check.tolerance)
					}
				}
			})
		}
	}
}

// loadChunked loads a fixture in float32 with prefill chunks of exactly rows rows.
func loadChunked(t testing.TB, name string, rows int) *Model {
	t.Helper()
	m, err := Load(fixtureDir(name), LoadOptions{Backend: goBackend(t), Chunks: ChunkOptions{MinRows: rows, MaxRows: rows}})
	if err != nil {
		t.Fatalf("loading %s: %v", name, err)
	}
	t.Cleanup(m.Close)
	return m
}

// TestChunkRows: chunks stay within the attention budget down to the smallest chunk, in powers
// of two, and shrink as the attended prefix grows.
func TestChunkRows(t *testing.T) {
	tests := []struct {
		heads, start, capacity, want int
	}{
		{heads: 16, start: 0, capacity: 40960, want: 512},
		{heads: 1, start: 0, capacity: 40960, want: defaultMaxChunkRows},
		{heads: 16, start: 4096, capacity: 40960, want: 32},
		{heads: 16, start: 40000, capacity: 40960, want: defaultMinChunkRows},
		{heads: 2, start: 0, capacity: 2048, want: defaultMaxChunkRows},
		{heads: 2, start: 30000, capacity: 40960, want: 64},
		{heads: 2, start: 8000, capacity: 40960, want: 128},
	}
	for _, tt := range tests {
		m := &Model{shape: Shape{Heads: tt.heads}, chunks: ChunkOptions{}.withDefaults()}
		got := m.chunkRows(tt.start, tt.capacity)
		if got != tt.want {
			t.Errorf("%d heads at %d: %d rows, want %d", tt.heads, tt.start, got, tt.want)
		}
		if got > defaultMinChunkRows && tt.heads*got*attendLength(tt.start+got, tt.capacity) > attentionBudget {
			t.Errorf("%d heads at %d: %d rows exceed the attention budget", tt.heads, tt.start, got)
		}
	}
}

// TestLongContextMemory runs Qwen3's whole context, 40,960 positions, through the full and the
// cached path of a small random model and checks that memory grows linearly: the peak RSS
// added by a 40,960-position prompt is well under 16× (quadratic growth) that of a 10,240
// one (with -short: 10,240 against 2,560). Attention scores of the whole prompt at once would
// take 6.7 GB per head.
func TestLongContextMemory(t *testing.T) {
	if !sysinfo.ResetPeakRSS() {
		t.Skip("cannot reset the peak RSS (Linux /proc/self/clear_refs)")
	}
	if raceEnabled {
		t.Skip("the race detector's shadow memory makes RSS measure the detector, not the model")
	}
	cfg := synth.QwenLike{VocabSize: 64, HiddenSize: 32, NumLayers: 1, NumHeads: 1, NumKVHeads: 1, HeadDim: 16,
		IntermediateSize: 32, MaxPositionEmbeddings: 40960, RopeTheta: 1_000_000, RMSNormEps: 1e-6, EOSTokenID: 1}
	dir := synthModel(t, cfg, 3)
	m, err := Load(dir, LoadOptions{Backend: goBackend(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	short, long := 10240, 40960
	if testing.Short() {
		short, long = 2560, 10240
	}
	growth := map[int]int64{}
	for _, n := range []int{short, long} {
		ids := make([]int, n)
		for i := range ids {
			ids[i] = (i*37 + i/5) % cfg.VocabSize
		}
		runtime.GC()
		debug.FreeOSMemory()
		before := sysinfo.RSS()
		sysinfo.ResetPeakRSS()
		full, err := m.Forward(ids)
		if err != nil {
			t.Fatal(err)
		}
		cache, err := m.NewCache(n / 2)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.ForwardCached(ids[:n/2], cache); err != nil {
			t.Fatal(err)
		}
		second, err := m.ForwardCached(ids[n/2:], cache)
		cache.Close()
		if err != nil {
			t.Fatal(err)
		}
		growth[n] = sysinfo.PeakRSS() - before
		worst := 0.0
		for i, v := range second.Data {
			if math.IsNaN(float64(v)) {
				t.Fatalf("%d positions: NaN logit", n)
			}
			worst = max(worst, math.Abs(float64(v)-float64(full.Data[(n/2)*full.Vocab+i])))
		}
		t.Logf("%d positions: peak RSS %d MiB above the %d MiB before; cached vs full path %.3g", n, growth[n]>>20, before>>20, worst)
		if worst > 1e-3 {
			t.Errorf("%d positions: the cached path differs from the full path by %g", n, worst)
		}
	}
	// The shorter run may fit in memory the process freed earlier and grow RSS by almost
	// nothing, so its growth counts as at least 64 MiB: a quadratic score tensor at the longer
	// length (heads × S² float32: 400 MiB at 10,240, 6.25 GiB at 40,960) still fails the check.
	if ratio := float64(growth[long]) / float64(max(growth[short], 64<<20)); ratio > 6 {
		t.Errorf("peak RSS grew %.1f× from %d to %d positions (%d → %d MiB): want linear (4×), not quadratic (16×)",
			ratio, short, long, growth[short]>>20, growth[long]>>20)
	}
}
