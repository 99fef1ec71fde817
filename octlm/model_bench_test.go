package octlm

// Benchmarks of the decoder's hot pieces at Qwen3-0.6B's widths with random weights:
//
//	GOEXPERIMENT=simd go test ./octlm/ -run '^$' -bench . -benchtime 20x
//
// Each reports tokens/s and, for the memory-bound pieces, the weight bytes it streams per
// second (weight_GB/s), which a decoder that reads every weight once per token cannot beat the
// machine's memory bandwidth with. BenchmarkHeadLayouts and BenchmarkPadLayouts run the
// layouts side by side.

import (
	"math/rand/v2"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/gomlx/compute"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // the graph DSL reads best unqualified
	"github.com/gomlx/gomlx/core/tensors"

	"github.com/octlm/octlm/internal/hostproduct"
	"github.com/octlm/octlm/octlm/synth"
	"github.com/octlm/octlm/xla"
)

// fullVocab is Qwen3's vocabulary size; smallVocab keeps the head out of the layer benchmarks.
const (
	fullVocab  = 151936
	smallVocab = 1024
	benchLen   = 128 // prompt length of the prefill benchmarks and cache fill of the decode ones
)

// benchCheckpoint writes a random checkpoint with Qwen3-0.6B's widths and the given number of
// layers and vocabulary (without tokenizer files) into a temporary folder.
func benchCheckpoint(b *testing.B, layers, vocab int) string {
	b.Helper()
	cfg := synth.Qwen3_0_6B()
	cfg.NumLayers, cfg.VocabSize = layers, vocab
	if vocab < fullVocab {
		cfg.BOSTokenID, cfg.EOSTokenID = 0, 1
	}
	dir := synthModel(b, cfg, 1)
	return dir
}

// benchModel loads a benchmark checkpoint with the current layout.
func benchModel(b *testing.B, layers, vocab int) *Model {
	b.Helper()
	return loadBench(b, benchCheckpoint(b, layers, vocab))
}

func loadBench(b *testing.B, dir string) *Model {
	b.Helper()
	return loadBenchOn(b, goBackend(b), dir, goLayout)
}

// loadBenchOn loads the checkpoint folder dir in float32 on backend with the given layout.
func loadBenchOn(b *testing.B, backend compute.Backend, dir string, layout Layout) *Model {
	b.Helper()
	return loadBenchAs(b, backend, dir, layout, Float32)
}

// loadBenchAs is loadBenchOn with the weights in dtype.
func loadBenchAs(b *testing.B, backend compute.Backend, dir string, layout Layout, dtype DType) *Model {
	b.Helper()
	m, err := Load(dir, LoadOptions{Backend: backend, Layout: &layout, DType: dtype})
	if err != nil {
		b.Fatalf("loading %s: %v", dir, err)
	}
	b.Cleanup(m.Close)
	return m
}

// benchCheckpointDir is $OCTLM_BENCH_CHECKPOINT, a full-size checkpoint folder, or skips the
// benchmark.
func benchCheckpointDir(b *testing.B) string {
	dir := os.Getenv("OCTLM_BENCH_CHECKPOINT")
	if dir == "" {
		b.Skip("set OCTLM_BENCH_CHECKPOINT to a checkpoint folder")
	}
	return dir
}

func benchPrompt(n, vocab int) []int {
	r := rand.New(rand.NewPCG(7, 7))
	ids := make([]int, n)
	for i := range ids {
		ids[i] = r.IntN(vocab)
	}
	return ids
}

// cpuTime is the CPU time the process has used (user and system), to report how many cores
// a benchmark kept busy: on a machine shared with other work, fewer than GOMAXPROCS.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// layerBytes is the float32 size of one decoder layer's weights.
func layerBytes(c Config) float64 {
	d, hd, ff := c.DModel, c.HeadWidth(), c.FFWidth()
	return 4 * float64(d*c.NHeads*hd*2+2*d*c.KVHeads*hd+3*d*ff+2*d+2*hd)
}

// BenchmarkLayerPrefill runs one decoder layer over a 128-token prompt (a 1024-token
// vocabulary keeps the head negligible).
func BenchmarkLayerPrefill(b *testing.B) {
	m := benchModel(b, 1, smallVocab)
	prompt := benchPrompt(benchLen, smallVocab)
	run := func() {
		cache, err := m.NewCache(benchLen)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := m.Next(prompt, cache); err != nil {
			b.Fatal(err)
		}
		cache.Close()
	}
	run() // compile
	b.ResetTimer()
	cpu := cpuTime()
	for b.Loop() {
		run()
	}
	b.ReportMetric((cpuTime()-cpu).Seconds()/b.Elapsed().Seconds(), "cores")
	b.ReportMetric(float64(benchLen*b.N)/b.Elapsed().Seconds(), "tokens/s")
	b.ReportMetric(2*layerBytes(qwen3Of(b, m))/4*benchLen*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}

// decoder steps one token at a time on top of a 128-token prompt, starting over (untimed)
// when the cache is full, so every step attends over 129 to 192 positions.
type decoder struct {
	b      *testing.B
	m      *Model
	prompt []int
	cache  *Cache
	next   int
}

func newDecoder(b *testing.B, m *Model) *decoder {
	d := &decoder{b: b, m: m, prompt: benchPrompt(benchLen, m.Shape().Vocab)}
	d.reset()
	d.step() // compile the decode graph
	return d
}

func (d *decoder) reset() {
	if d.cache != nil {
		d.cache.Close()
	}
	var err error
	if d.cache, err = d.m.NewCache(benchLen + 64); err != nil {
		d.b.Fatal(err)
	}
	logits, err := d.m.Next(d.prompt, d.cache)
	if err != nil {
		d.b.Fatal(err)
	}
	d.next = Argmax(logits)
}

// step decodes one token and returns how long it took (a refill of the cache is not counted).
func (d *decoder) step() time.Duration {
	if d.cache.Len() == d.cache.Capacity() {
		d.reset()
	}
	begin := time.Now()
	logits, err := d.m.Next([]int{d.next}, d.cache)
	if err != nil {
		d.b.Fatal(err)
	}
	d.next = Argmax(logits)
	return time.Since(begin)
}

// BenchmarkLayerDecode decodes single tokens through one decoder layer.
func BenchmarkLayerDecode(b *testing.B) {
	m := benchModel(b, 1, smallVocab)
	d := newDecoder(b, m)
	var took time.Duration
	cpu := cpuTime()
	for b.Loop() {
		took += d.step()
	}
	b.ReportMetric((cpuTime()-cpu).Seconds()/b.Elapsed().Seconds(), "cores")
	b.ReportMetric(float64(b.N)/took.Seconds(), "tokens/s")
	b.ReportMetric(layerBytes(qwen3Of(b, m))*float64(b.N)/took.Seconds()/1e9, "weight_GB/s")
}

// BenchmarkLMHead runs the final norm and the tied output head on one row at the full
// vocabulary, through the same graph code as the model.
func BenchmarkLMHead(b *testing.B) {
	m := benchModel(b, 1, fullVocab)
	eps := qwen3Of(b, m).Eps()
	exec, err := NewExec(m.Backend, func(hidden, table, norm *Node) *Node {
		o := ops{layout: m.layout, vocab: m.Shape().Vocab}
		return o.head(rmsNorm(o, hidden, norm, eps), []*Node{table})
	})
	if err != nil {
		b.Fatal(err)
	}
	defer exec.Finalize()
	hidden := tensors.FromValue([][]float32{make([]float32, m.Shape().Width)})
	run := func() {
		out, err := exec.Call(hidden, m.weights[0], m.weights[1])
		if err != nil {
			b.Fatal(err)
		}
		out[0].FinalizeAll()
	}
	run()
	b.ResetTimer()
	for b.Loop() {
		run()
	}
	bytes := float64(m.weights[0].Shape().ByteSize())
	b.ReportMetric(bytes*float64(b.N)/b.Elapsed().Seconds()/1e9, "weight_GB/s")
}

// BenchmarkSample picks a token from logits at Qwen3's vocabulary: greedy, and Qwen3's
// default sampling (temperature 0.6, top-k 20, top-p 0.95) on the host.
func BenchmarkSample(b *testing.B) {
	r := rand.New(rand.NewPCG(3, 3))
	logits := make([]float32, fullVocab)
	for i := range logits {
		logits[i] = float32(r.NormFloat64() * 3)
	}
	work := make([]float32, fullVocab)
	for _, s := range []struct {
		name string
		s    Sampling
	}{{"greedy", Greedy()}, {"qwen-defaults", QwenDefaults()}} {
		b.Run(s.name, func(b *testing.B) {
			sp := NewSampler(s.s)
			for b.Loop() {
				copy(work, logits) // Next works in place
				sp.Next(work, nil)
			}
		})
	}
}

// layoutCase is one weight layout of the pure-Go backend, with the weights in dtype (float32
// when empty).
type layoutCase struct {
	name   string
	layout Layout
	dtype  DType
	on     compute.Backend // nil: the pure-Go backend as xla.Open gives it (goBackend)
}

// load loads the checkpoint folder dir with c's layout and dtype on c's backend.
func (c layoutCase) load(b *testing.B, dir string) *Model {
	b.Helper()
	backend := c.on
	if backend == nil {
		backend = goBackend(b)
	}
	return loadBenchAs(b, backend, dir, c.layout, c.dtype)
}

// decodeSideBySide loads the checkpoint once per layout and decodes one step with each in turn,
// reporting each layout's time per step and its ratio to the first layout's ("x_<first>" below
// 1 is faster). Interleaving the layouts makes the ratios fair on a machine shared with other
// work, where absolute times drift.
func decodeSideBySide(b *testing.B, dir string, layouts []layoutCase) {
	decoders := make([]*decoder, len(layouts))
	for i, l := range layouts {
		decoders[i] = newDecoder(b, l.load(b, dir))
	}
	took := make([]time.Duration, len(layouts))
	for b.Loop() {
		for i, d := range decoders {
			took[i] += d.step()
		}
	}
	for i, l := range layouts {
		b.ReportMetric(float64(took[i].Microseconds())/1000/float64(b.N), "ms/"+l.name)
		if i > 0 {
			b.ReportMetric(took[i].Seconds()/took[0].Seconds(), "x_"+layouts[0].name+"/"+l.name)
		}
	}
}

// prefillSideBySide is decodeSideBySide for a 128-token prefill.
func prefillSideBySide(b *testing.B, dir string, layouts []layoutCase) {
	models := make([]*Model, len(layouts))
	for i, l := range layouts {
		models[i] = l.load(b, dir)
	}
	prompt := benchPrompt(benchLen, models[0].Shape().Vocab)
	prefill := func(m *Model) time.Duration {
		cache, err := m.NewCache(benchLen)
		if err != nil {
			b.Fatal(err)
		}
		defer cache.Close()
		begin := time.Now()
		if _, err := m.Next(prompt, cache); err != nil {
			b.Fatal(err)
		}
		return time.Since(begin)
	}
	for _, m := range models {
		prefill(m) // compile
	}
	took := make([]time.Duration, len(layouts))
	for b.Loop() {
		for i, m := range models {
			took[i] += prefill(m)
		}
	}
	for i, l := range layouts {
		b.ReportMetric(float64(benchLen*b.N)/took[i].Seconds(), "tok/s/"+l.name)
		if i > 0 {
			b.ReportMetric(took[i].Seconds()/took[0].Seconds(), "x_"+layouts[0].name+"/"+l.name)
		}
	}
}

// goLayout is the pure-Go engine's layout, the default of these benchmarks.
var goLayout = LayoutFor(xla.EngineGo)

// withTable and withPad are goLayout with the table stored as columns or rows, and with
// products padded to goPadMACs or not.
func withTable(columns bool) Layout { l := goLayout; l.TableColumns = columns; return l }
func withPad(macs int) Layout       { l := goLayout; l.PadMACs = macs; return l }

// BenchmarkHeadLayouts decodes through one layer and the full-vocabulary head with the
// embedding (the tied head) stored as columns and as rows.
func BenchmarkHeadLayouts(b *testing.B) {
	decodeSideBySide(b, benchCheckpoint(b, 1, fullVocab), []layoutCase{
		{"columns", withTable(true), "", nil}, {"rows", withTable(false), "", nil},
	})
}

// BenchmarkPadLayoutsPrefill is BenchmarkPadLayouts for a 128-token prefill.
func BenchmarkPadLayoutsPrefill(b *testing.B) {
	prefillSideBySide(b, benchCheckpoint(b, 4, smallVocab), []layoutCase{
		{"padded", withPad(goPadMACs), "", nil}, {"unpadded", withPad(0), "", nil},
	})
}

// BenchmarkPadLayouts decodes through four layers (small vocabulary) with the products' rows
// padded up to the large kernel's threshold and not.
func BenchmarkPadLayouts(b *testing.B) {
	decodeSideBySide(b, benchCheckpoint(b, 4, smallVocab), []layoutCase{
		{"padded", withPad(goPadMACs), "", nil}, {"unpadded", withPad(0), "", nil},
	})
}

// BenchmarkCheckpointLayouts compares the layout octlm started with (the table as rows, no
// padding) with the current pure-Go layout, side by side on a full checkpoint:
//
//	OCTLM_BENCH_CHECKPOINT=/path/to/qwen3-0.6b GOEXPERIMENT=simd go test ./octlm/ -run '^$' \
//	    -bench CheckpointLayouts -benchtime 16x
//
// It needs memory for two copies of the model.
func BenchmarkCheckpointLayouts(b *testing.B) {
	dir := benchCheckpointDir(b)
	before := Layout{UpcastHalfDot: true}
	layouts := []layoutCase{{"before", before, "", nil}, {"now", goLayout, "", nil}}
	b.Run("decode", func(b *testing.B) { decodeSideBySide(b, dir, layouts) })
	b.Run("prefill", func(b *testing.B) { prefillSideBySide(b, dir, layouts) })
}

// BenchmarkPanelsOrRows decodes one step and prefills 128 tokens side by side with the pure-Go
// layout (Linear pieces as panels of 64 columns, Layout.PiecePanels) and with the pieces as rows
// [n, in] as stored (LinearRows, no panels), in float32 and bfloat16, on a full checkpoint:
//
//	OCTLM_BENCH_CHECKPOINT=/path/to/qwen3-0.6b GOEXPERIMENT=simd go test ./octlm/ -run '^$' \
//	    -bench PanelsOrRows -benchtime 20x
//
// Which is faster depends on the CPU. A random Qwen3-0.6B on a 2-core Intel Xeon (Emerald Rapids,
// 2026-12-05, two runs of 12–30 steps and 10–30 prompts): rows decode in 0.87–0.88 of the
// panels' time in float32 and 0.89–0.91 in bfloat16 (compute's transposed kernel reads rows
// faster there, BenchmarkMatMulPanels), but prefill at 0.80–0.83 (float32) and 0.85–0.87
// (bfloat16) of their tokens/s; on an AMD Zen 5 the panels were faster in both
// (BenchmarkMatMulPanels, and the layout's history in docs/performance.md). Panels stay the
// layout on every CPU.
func BenchmarkPanelsOrRows(b *testing.B) {
	dir := benchCheckpointDir(b)
	rows := goLayout
	rows.PiecePanels = 0
	rows.LinearRows = true
	for _, dt := range []DType{Float32, BFloat16} {
		layouts := []layoutCase{{"panels", goLayout, dt, nil}, {"rows", rows, dt, nil}}
		b.Run(string(dt)+"/decode", func(b *testing.B) { decodeSideBySide(b, dir, layouts) })
		b.Run(string(dt)+"/prefill", func(b *testing.B) { prefillSideBySide(b, dir, layouts) })
	}
}

// BenchmarkHostProducts decodes the checkpoint with the go layout on the pure-Go backend as
// octlm opens it, where a step's products by panels run in Go (internal/hostproduct), and on the
// backend it wraps, where compute's small kernel runs them, a row padded to its four-row tile;
// float32 and bfloat16, alternated ("x_go/compute" above 1: the products in Go are faster).
func BenchmarkHostProducts(b *testing.B) {
	dir := benchCheckpointDir(b)
	wrapped, ok := goBackend(b).(*hostproduct.Backend)
	if !ok {
		b.Fatalf("the go backend is %T, not wrapped", goBackend(b))
	}
	for _, dt := range []DType{Float32, BFloat16} {
		layouts := []layoutCase{{"go", goLayout, dt, nil}, {"compute", goLayout, dt, wrapped.Unwrap()}}
		b.Run(string(dt), func(b *testing.B) { decodeSideBySide(b, dir, layouts) })
	}
}

// BenchmarkHostAttention decodes after a 128-token prompt with attention over the cache in Go
// (Layout.HostAttention, the pure-Go backend as octlm opens it) and on compute's kernels (the
// same backend wrapped without hostproduct's Options.Attention: the values stored transposed,
// CacheLeft), step by step alternated, in float32 and bfloat16.
func BenchmarkHostAttention(b *testing.B) {
	dir := benchCheckpointDir(b)
	for _, dt := range []DType{Float32, BFloat16} {
		layouts := []layoutCase{{"go", goLayout, dt, nil}, {"compute", goLayout, dt, computeAttentionBackend(b)}}
		b.Run(string(dt), func(b *testing.B) { decodeSideBySide(b, dir, layouts) })
	}
}

// BenchmarkDecodeDTypes decodes through four layers and the full-vocabulary head with the
// weights in float32 and in bfloat16, side by side (the question whether bfloat16, half the
// bytes per token, is the faster way to generate on the pure-Go backend).
func BenchmarkDecodeDTypes(b *testing.B) {
	dir := benchCheckpoint(b, 4, fullVocab)
	dts := []DType{Float32, BFloat16}
	decoders := make([]*decoder, len(dts))
	for i, dt := range dts {
		m, err := Load(dir, LoadOptions{Backend: goBackend(b), DType: dt})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(m.Close)
		decoders[i] = newDecoder(b, m)
	}
	took := make([]time.Duration, len(dts))
	for b.Loop() {
		for i, d := range decoders {
			took[i] += d.step()
		}
	}
	for i, dt := range dts {
		b.ReportMetric(float64(took[i].Microseconds())/1000/float64(b.N), "ms/"+string(dt))
	}
	b.ReportMetric(took[1].Seconds()/took[0].Seconds(), "x_bf16/f32")
}
