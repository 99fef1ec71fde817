package octlm

import (
	"slices"
	"testing"
	"time"

	"github.com/octlm/octlm/xla"
)

// BenchmarkDecodeAtDepthLayouts decodes on a full-size checkpoint ($OCTLM_BENCH_CHECKPOINT, e.g. a
// random Qwen3-0.6B from `octlm synth --like qwen3-0.6b`; skipped without it) at depth 4,096 on
// ONNX Runtime with the cache multiplied on the right (q·Kᵀ, p·V) and on the left
// (Layout.CacheLeft), alternated round by round in one process on the same loaded weights, as
// `octlm bench --depth 4096 --depth-fill zeros --prompt 32 --decode 16` runs: zero keys and
// values to 4,096 positions, a 32-token prompt, then 16 decode steps. It reports each layout's
// fastest and median step over all rounds. The layout is switched on the loaded model (only the
// cache and the step graphs depend on it; a switch gives each its own compiled step graphs).
// "depth0" is the same decode after a 128-token prompt on an empty cache, the engine's layout,
// in the same rounds: the step at depth over it is issue 34's ratio (goal: 1.5).
func BenchmarkDecodeAtDepthLayouts(b *testing.B) {
	m := loadBenchOn(b, onnxBackend(b), benchCheckpointDir(b), LayoutFor(xla.EngineONNX))
	const depth, prompt, decode = 4096, 32, 16
	ids := make([]int, prompt)
	for i := range ids {
		ids[i] = (i*7919 + 13) % m.Shape().Vocab
	}
	steps := map[string][]time.Duration{}
	run := func(name string, left bool, pad int, prompt []int) {
		m.layout.CacheLeft = left
		cache, err := m.NewCache(pad + len(prompt) + decode)
		if err != nil {
			b.Fatal(err)
		}
		defer cache.Close()
		if err := cache.Pad(pad); err != nil {
			b.Fatal(err)
		}
		if _, err := m.ForwardCached(prompt, cache); err != nil {
			b.Fatal(err)
		}
		for i := range decode {
			begin := time.Now()
			if _, err := m.Next([]int{prompt[i]}, cache); err != nil {
				b.Fatal(err)
			}
			if i > 0 { // the first step compiles
				steps[name] = append(steps[name], time.Since(begin))
			}
		}
	}
	long := slices.Repeat(ids, 4) // depth 0: a 128-token prompt, as octlm bench runs it
	for b.Loop() {
		run("stored", false, depth, ids)
		run("left", true, depth, ids)
		run("depth0", LayoutFor(xla.EngineONNX).CacheLeft, 0, long)
	}
	for _, name := range []string{"stored", "left", "depth0"} {
		s := steps[name]
		slices.Sort(s)
		b.ReportMetric(float64(s[0].Microseconds())/1000, name+"-best-ms")
		b.ReportMetric(float64(s[len(s)/2].Microseconds())/1000, name+"-median-ms")
	}
}
