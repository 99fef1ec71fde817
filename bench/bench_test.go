package bench

import (
	"bytes"
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gomlx/compute"
	_ "github.com/gomlx/compute/gobackend"

	"github.com/octlm/octlm/octlm"
	"github.com/octlm/octlm/octlm/lora"
	"github.com/octlm/octlm/octlm/synth"
	"github.com/octlm/octlm/xla"
)

func TestSumFloat32(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 7, 8, 31, 32, 33, 100, 4096 + 5} {
		a := make([]float32, n)
		want := 0.0
		for i := range a {
			a[i] = float32(r.IntN(200) - 100) // small integers: every order of summation is exact
			want += float64(a[i])
		}
		if got := sumFloat32(a); float64(got) != want {
			t.Errorf("n=%d: sumFloat32 = %v, want %v", n, got, want)
		}
		if got := sumScalar(a); float64(got) != want {
			t.Errorf("n=%d: sumScalar = %v, want %v", n, got, want)
		}
	}
}

func TestPromptIDs(t *testing.T) {
	a, b := promptIDs(300, 320), promptIDs(300, 320)
	seen := map[int]bool{}
	for i, id := range a {
		if id < 0 || id >= 320 {
			t.Fatalf("id %d at %d outside the vocabulary", id, i)
		}
		if id != b[i] {
			t.Fatalf("prompt differs between calls at %d", i)
		}
		seen[id] = true
	}
	if len(seen) < 100 {
		t.Fatalf("only %d distinct IDs in 300: not a varied prompt", len(seen))
	}
}

// TestRun runs the whole benchmark on the tiny fixture and checks that the numbers hang
// together: counts as asked, throughputs consistent with their times, sizes as the config says.
func TestRun(t *testing.T) {
	backend, err := compute.NewWithConfig("go")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join("..", "testdata", "tiny-qwen3")
	r, err := Run(context.Background(), Options{Dir: dir, Backend: backend, BackendName: "go",
		PromptTokens: 20, DecodeTokens: 5, BandwidthBytes: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := octlm.ReadQwen3Config(filepath.Join(dir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(math.Abs(a), math.Abs(b)) }
	checks := []struct {
		name string
		ok   bool
	}{
		{"prompt and decode counts", r.PromptTokens == 20 && r.DecodeTokens == 5},
		{"dtype defaults to f32", r.DType == "f32"},
		{"decode speed = tokens / seconds", near(r.DecodeTokensPerSecond, 5/r.DecodeSeconds)},
		{"ms per token = 1000 / speed", near(r.DecodeMsPerToken, 1000/r.DecodeTokensPerSecond)},
		{"prefill speed = tokens / seconds", near(r.PrefillTokensPerSecond, 20/r.PrefillSeconds)},
		{"load ratio = plain read time / load time", near(r.LoadReadRatio, r.PlainReadSeconds/r.LoadSeconds)},
		{"KV bytes per position from the config", r.KVCacheBytesPerPosition == int64(2*cfg.NLayers*cfg.KVHeads*cfg.HeadWidth()*4)},
		{"weights: float32 parameters", r.WeightBytes == 4*cfg.Parameters()},
		{"roofline from its parts", near(r.RooflineRatio, float64(r.WeightBytesPerToken)*r.DecodeTokensPerSecond/r.ReadBandwidthBytesPerSec)},
		{"compiled at least prefill and decode", r.CompiledGraphs >= 2 && r.CompileSeconds > 0},
		// Wall times of two separately timed calls are not compared: on a shared machine either can stretch.
		{"cold first token measured", r.ColdTimeToFirstToken > 0},
		{"peak RSS measured", r.PeakRSSBytes >= r.LoadPeakRSSBytes && r.LoadPeakRSSBytes > 0},
		{"bandwidth measured", r.ReadBandwidthBytesPerSec > 1e8},
		{"cores busy measured", r.PrefillCores > 0 && r.DecodeCores > 0},
		{"checkpoint size", r.CheckpointBytes > 0 && r.PlainReadSeconds > 0},
		{"one run by default", r.Reps == 1 && len(r.DecodeTokensPerSecondRuns) == 1 && r.DecodeTokensPerSecondMedian == r.DecodeTokensPerSecond},
		{"no step times from an engine that does not time its steps", r.DecodeSteps == nil},
	}
	for _, c := range checks {
		if !c.ok {
			t.Errorf("%s: not so in %+v", c.name, r)
		}
	}
}

// TestRunTimesSteps runs the benchmark on the pure-Go engine as octlm opens it (products and
// attention in Go): the decode's steps and each batch's are split into products, attention and
// the other parts, which add up to no more than the graph's whole run, itself no more than the
// step, and the products' weight bytes per
// second follow from the weights a step reads.
func TestRunTimesSteps(t *testing.T) {
	backend, _, err := xla.Open("go")
	if err != nil {
		t.Fatal(err)
	}
	defer backend.Finalize()
	// The engine multiplies in Go the weights of at least 4 Mi multiply-adds (octlm's
	// goSmallMACs): here the MLP's and the embedding table's (the tied head).
	cfg := synth.Tiny()
	cfg.HiddenSize, cfg.NumHeads, cfg.NumKVHeads, cfg.HeadDim, cfg.NumLayers = 256, 4, 2, 64, 1
	cfg.IntermediateSize, cfg.VocabSize = 16384, 16384
	dir := t.TempDir()
	if err := synth.Write(dir, cfg, 5, nil); err != nil {
		t.Fatal(err)
	}
	r, err := Run(context.Background(), Options{Dir: dir, Backend: backend,
		BackendName: "go", PromptTokens: 12, DecodeTokens: 4, Batches: []int{2}, BandwidthBytes: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	check := func(what string, s *StepTimes, stepMs float64) {
		t.Helper()
		if s == nil {
			t.Fatalf("%s: no step times", what)
		}
		parts := s.ProductsMs + s.AttentionMs + s.PiecesMs
		if s.ProductsMs <= 0 || s.PiecesMs <= 0 || s.AttentionMs < 0 || parts > s.GraphMs*(1+1e-9) || s.GraphMs > stepMs*(1+1e-9) {
			t.Errorf("%s: %+v for a %.3f ms step", what, *s, stepMs)
		}
		// A step's products read the MLP's three float32 weights once, and no more than all
		// the weights.
		mlp := float64(3 * cfg.IntermediateSize * cfg.HiddenSize * 4)
		if bytes := s.ProductReadBytesPerSecond * s.ProductsMs / 1000; bytes < mlp*(1-1e-9) || bytes > float64(r.WeightBytesPerToken) {
			t.Errorf("%s: products read %.0f bytes a step: want from the MLP's %.0f to the weights' %d", what, bytes, mlp, r.WeightBytesPerToken)
		}
	}
	check("decode", r.DecodeSteps, r.DecodeMsPerToken)
	if len(r.Batches) != 2 {
		t.Fatalf("batches %+v, want B = 1 and 2", r.Batches)
	}
	for _, row := range r.Batches {
		check("batch "+strconv.Itoa(row.Batch), row.Steps, row.DecodeMsPerStep)
	}
	var text strings.Builder
	if err := r.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"decode step", "products ms"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, text.String())
		}
	}
}

// TestRunReps repeats the timed runs: the report's speeds are the best runs', with the medians
// and every run alongside.
func TestRunReps(t *testing.T) {
	backend, err := compute.NewWithConfig("go")
	if err != nil {
		t.Fatal(err)
	}
	r, err := Run(context.Background(), Options{Dir: filepath.Join("..", "testdata", "tiny-qwen3"), Backend: backend,
		BackendName: "go", PromptTokens: 12, DecodeTokens: 4, Reps: 3, BandwidthBytes: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if r.Reps != 3 || len(r.PrefillTokensPerSecondRuns) != 3 || len(r.DecodeTokensPerSecondRuns) != 3 {
		t.Fatalf("reps %d, runs %v and %v", r.Reps, r.PrefillTokensPerSecondRuns, r.DecodeTokensPerSecondRuns)
	}
	for _, c := range []struct {
		name         string
		best, median float64
		runs         []float64
	}{
		{"prefill", r.PrefillTokensPerSecond, r.PrefillTokensPerSecondMedian, r.PrefillTokensPerSecondRuns},
		{"decode", r.DecodeTokensPerSecond, r.DecodeTokensPerSecondMedian, r.DecodeTokensPerSecondRuns},
	} {
		sorted := slices.Sorted(slices.Values(c.runs))
		if math.Abs(c.best-sorted[2]) > 1e-9*c.best || c.median != sorted[1] {
			t.Errorf("%s: best %v, median %v of runs %v", c.name, c.best, c.median, c.runs)
		}
	}
	var text strings.Builder
	if err := r.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "best of 3 runs, median") {
		t.Errorf("report does not say best and median:\n%s", text.String())
	}
}

func TestMedian(t *testing.T) {
	for _, tt := range []struct {
		xs   []float64
		want float64
	}{{[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}, {nil, 0}} {
		if got := median(tt.xs); got != tt.want {
			t.Errorf("median(%v) = %v, want %v", tt.xs, got, tt.want)
		}
	}
}

func TestRunErrors(t *testing.T) {
	backend, err := compute.NewWithConfig("go")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join("..", "testdata", "tiny-qwen3")
	tests := []struct {
		name string
		opts Options
	}{
		{"no backend", Options{Dir: dir}},
		{"no checkpoint", Options{Dir: t.TempDir(), Backend: backend}},
		{"longer than the context", Options{Dir: dir, Backend: backend, PromptTokens: 40000, DecodeTokens: 1000, BandwidthBytes: 1 << 20}},
		{"deeper than the context", Options{Dir: dir, Backend: backend, Depth: 40960, BandwidthBytes: 1 << 20}},
		{"unknown fill", Options{Dir: dir, Backend: backend, Depth: 10, DepthFill: "ones", BandwidthBytes: 1 << 20}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Run(context.Background(), tt.opts); err == nil {
				t.Fatal("Run succeeded")
			}
		})
	}
}

// TestCheckLengths: depth + prompt + decode may fill the context exactly; one more, or counts
// whose sum overflows int, are a *octlm.ContextError.
func TestCheckLengths(t *testing.T) {
	tests := []struct {
		depth, prompt, decode int
		fill                  string
		ok                    bool
	}{
		{0, 128, 64, FillPrefill, true},
		{40000, 900, 60, FillZeros, true},
		{40000, 900, 61, FillZeros, false},
		{40960, 1, 1, FillPrefill, false},
		{math.MaxInt, math.MaxInt, math.MaxInt, FillPrefill, false},
		{1, math.MaxInt, 1, FillPrefill, false},
		{-1, 1, 1, FillPrefill, false},
		{1, 1, 1, "ones", false},
	}
	for _, tt := range tests {
		err := checkLengths(Options{Depth: tt.depth, PromptTokens: tt.prompt, DecodeTokens: tt.decode, DepthFill: tt.fill}, 40960)
		var ce *octlm.ContextError
		switch {
		case tt.ok && err != nil:
			t.Errorf("%+v: %v", tt, err)
		case !tt.ok && !errors.Is(err, octlm.ErrBadInput):
			t.Errorf("%+v: %v, want bad input", tt, err)
		case !tt.ok && tt.fill != "ones" && tt.depth >= 0 && (!errors.As(err, &ce) || ce.Positions <= 40960):
			t.Errorf("%+v: %v, want a *ContextError past 40960 positions", tt, err)
		}
	}
}

// TestRunDepth measures prefill and decode on top of a KV cache filled to a depth, both ways.
func TestRunDepth(t *testing.T) {
	backend, err := compute.NewWithConfig("go")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join("..", "testdata", "tiny-qwen3")
	for _, fill := range []string{FillPrefill, FillZeros} {
		t.Run(fill, func(t *testing.T) {
			r, err := Run(context.Background(), Options{Dir: dir, Backend: backend, BackendName: "go",
				Depth: 300, DepthFill: fill, PromptTokens: 8, DecodeTokens: 3, BandwidthBytes: 64 << 20, KVDType: octlm.BFloat16})
			if err != nil {
				t.Fatal(err)
			}
			if r.Depth != 300 || r.DepthFill != fill || (fill == FillPrefill) != (r.DepthFillSeconds > 0) {
				t.Errorf("depth %d, fill %q in %g s", r.Depth, r.DepthFill, r.DepthFillSeconds)
			}
			cfg, err := octlm.ReadQwen3Config(filepath.Join(dir, "config.json"))
			if err != nil {
				t.Fatal(err)
			}
			if r.KVDType != "bf16" || r.KVCacheBytesPerPosition != int64(2*cfg.NLayers*cfg.KVHeads*cfg.HeadWidth()*2) {
				t.Errorf("KV cache %s, %d bytes per position: want bf16, 2 bytes a value", r.KVDType, r.KVCacheBytesPerPosition)
			}
			// The cache's capacity: the positions of depth, prompt and decode, rounded up to
			// whole blocks (at most twice as many below 1,024 positions).
			if want := int64(300+8+3) * r.KVCacheBytesPerPosition; r.KVCacheBytes < want || r.KVCacheBytes > 2*want {
				t.Errorf("KV cache %d bytes, want %d to %d (the positions of depth, prompt and decode, in whole blocks)", r.KVCacheBytes, want, 2*want)
			}
			var text bytes.Buffer
			if err := r.WriteText(&text); err != nil || !strings.Contains(text.String(), "300 positions in the KV cache before the prompt") {
				t.Errorf("report lacks the depth (%v):\n%s", err, text.String())
			}
		})
	}
}

// TestRunBatches measures the batched-decode table on a small random checkpoint: a row per batch
// size (1 added, ascending), the speeds consistent with their times and the ratios with the B=1
// row, and the table printed under the report.
func TestRunBatches(t *testing.T) {
	backend, err := compute.NewWithConfig("go")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := synth.Write(dir, synth.Tiny(), 3, nil); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		opts    Options
		batches []int
	}{
		{"4,2", Options{PromptTokens: 6, DecodeTokens: 3, Batches: []int{4, 2}}, []int{1, 2, 4}},
		{"3 at a depth", Options{PromptTokens: 5, DecodeTokens: 2, Depth: 7, DepthFill: FillZeros, Batches: []int{3}}, []int{1, 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := tt.opts
			opts.Dir, opts.Backend, opts.BackendName, opts.BandwidthBytes = dir, backend, "go", 64<<20
			r, err := Run(context.Background(), opts)
			if err != nil {
				t.Fatal(err)
			}
			var got []int
			for _, row := range r.Batches {
				got = append(got, row.Batch)
				near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(math.Abs(a), math.Abs(b)) }
				if row.DecodeTokens != opts.DecodeTokens || !(row.DecodeSeconds > 0) ||
					!near(row.DecodeTokensPerSecond, float64(row.Batch*opts.DecodeTokens)/row.DecodeSeconds) ||
					!near(row.DecodeMsPerStep, 1000*row.DecodeSeconds/float64(opts.DecodeTokens)) ||
					!near(row.SpeedUp, row.DecodeTokensPerSecond/r.Batches[0].DecodeTokensPerSecond) {
					t.Errorf("row %+v does not hang together (B=1: %+v)", row, r.Batches[0])
				}
			}
			if !slices.Equal(got, tt.batches) {
				t.Fatalf("rows for batches %v, want %v", got, tt.batches)
			}
			var text bytes.Buffer
			if err := r.WriteText(&text); err != nil {
				t.Fatal(err)
			}
			table := text.String()[strings.Index(text.String(), "batched decode:"):]
			lines := strings.Split(strings.TrimSpace(table), "\n")
			if len(lines) != 2+len(tt.batches) || !strings.Contains(lines[1], "speed-up over B=1") {
				t.Fatalf("batched-decode table:\n%s", table)
			}
			for i, b := range tt.batches {
				if f := strings.Fields(lines[2+i]); len(f) != 4 || f[0] != strconv.Itoa(b) {
					t.Errorf("table row %q, want batch %d first of 4 columns", lines[2+i], b)
				}
			}
		})
	}
	_, err = Run(context.Background(), Options{Dir: dir, Backend: backend, PromptTokens: 4, DecodeTokens: 1, BandwidthBytes: 1 << 20, Batches: []int{0}})
	if !errors.Is(err, octlm.ErrBadInput) {
		t.Errorf("batch size 0: %v, want bad input", err)
	}
}

// TestRunAdapter: with an adapter the benchmark loads it (a wrong one is refused by Load) and
// the report names it.
func TestRunAdapter(t *testing.T) {
	backend, err := compute.NewWithConfig("go")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join("..", "testdata", "tiny-qwen3")
	adapterDir := filepath.Join("..", "testdata", "tiny-qwen3-finetune", "lora", "reference-adapter")
	a, err := lora.Read(adapterDir)
	if err != nil {
		t.Fatal(err)
	}
	dec, err := octlm.ReadDecoder(dir)
	if err != nil {
		t.Fatal(err)
	}
	l, err := a.ToLoRA(lora.Linears(dec.Weights()))
	if err != nil {
		t.Fatal(err)
	}
	r, err := Run(context.Background(), Options{Dir: dir, Backend: backend, BackendName: "go", PromptTokens: 4, DecodeTokens: 2,
		BandwidthBytes: 1 << 20, Adapter: l, AdapterName: adapterDir})
	if err != nil {
		t.Fatal(err)
	}
	var text bytes.Buffer
	if err := r.WriteText(&text); err != nil || r.Adapter != adapterDir || !strings.Contains(text.String(), adapterDir+" (LoRA, unmerged)") {
		t.Errorf("adapter %q (%v) in the report:\n%s", r.Adapter, err, text.String())
	}
	const q = "model.layers.0.self_attn.q_proj.weight"
	m, ok := l.Modules[q]
	if !ok {
		t.Fatalf("the adapter has no %s", q)
	}
	m.Out++ // a size that fits no weight
	l.Modules[q] = m
	if _, err := Run(context.Background(), Options{Dir: dir, Backend: backend, PromptTokens: 4, DecodeTokens: 2, BandwidthBytes: 1 << 20, Adapter: l}); !errors.Is(err, octlm.ErrBadInput) {
		t.Errorf("a misfit adapter: %v, want bad input", err)
	}
}
