// Package bench measures octlm end to end on one checkpoint: how fast it loads compared with a
// plain read of the same files, how long its graphs take to compile, prefill and decode speed,
// time to first token, peak memory, KV-cache size, and how close decoding comes to the memory
// bandwidth the same run measures (the roofline ratio).
//
// It drives package octlm through its public API on a backend it is given; it knows nothing of
// graphs, kernels or file formats, and it does not choose backends or resolve Hub names.
package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"time"

	"github.com/gomlx/compute"

	"github.com/octlm/octlm/internal/buildinfo"
	"github.com/octlm/octlm/internal/sysinfo"
	"github.com/octlm/octlm/loader"
	"github.com/octlm/octlm/octlm"
	"github.com/octlm/octlm/units"
)

// Options say what to measure.
type Options struct {
	Dir         string          // checkpoint folder (config.json and safetensors)
	Backend     compute.Backend // where the model runs
	BackendName string          // how the backend was asked for, for the report
	DType       octlm.DType     // resident weights and activations; "" means f32

	PromptTokens int // prompt length for prefill and time to first token (default 128)
	DecodeTokens int // tokens generated one at a time after the prompt (default 64)
	// Reps is how many times the timed prefill and decode run (default 1); the result reports
	// the best run and the median of each.
	Reps int

	// Depth is how many positions the KV cache holds before the timed prompt (llama-bench's
	// -d): prefill and decode are measured on top of them.
	Depth int
	// DepthFill says how the cache gets to Depth: FillPrefill (the default) runs a prompt of
	// Depth random tokens, timed on its own; FillZeros appends zero keys and values without
	// running the model (octlm.Cache.Pad), which times the same decode steps in no time.
	DepthFill string
	// KVDType stores the KV cache in Float32, BFloat16 or Float16; "" means the dtype generation
	// stores it in (Model.GenerationCacheDType).
	KVDType octlm.DType

	// Batches are the batch sizes of the batched-decode table: for each B, B sequences (each the
	// prompt on top of Depth positions, on its own cache) decode DecodeTokens tokens together,
	// one NextBatch step per token. B = 1 is measured too, the ratios' baseline. None: no table.
	Batches []int

	// Adapter, when set, is a LoRA applied unmerged (octlm.LoadOptions.Adapter); AdapterName
	// says which for the report.
	Adapter     *octlm.LoRA
	AdapterName string

	// BandwidthBytes is the size of the streaming read that measures memory bandwidth
	// (0 means MinBandwidthBytes; smaller reads may be served by caches and overstate it).
	BandwidthBytes int64

	// Log receives progress lines; nil means none.
	Log io.Writer
	// LoadProgress, when set, is called while the weights stream in.
	LoadProgress func(done, total int64)
}

// The ways to fill the KV cache to the depth.
const (
	FillPrefill = "prefill"
	FillZeros   = "zeros"
)

// MinBandwidthBytes is the smallest streaming read that measures memory rather than caches.
const MinBandwidthBytes = 1 << 30

// Result is one run's measurements. Speeds are per second of wall time; seconds that include
// graph compilation say so.
type Result struct {
	Date        string  `json:"date"`
	Machine     string  `json:"machine"` // CPU model, cores, memory
	CPUs        int     `json:"cpus"`
	GOMAXPROCS  int     `json:"gomaxprocs"`
	MemoryBytes int64   `json:"memory_bytes"`
	LoadAverage float64 `json:"load_average"` // 1-minute load average at the start: other work on the machine
	GoVersion   string  `json:"go_version"`
	SIMD        bool    `json:"simd"` // built with GOEXPERIMENT=simd

	Model   string `json:"model"`
	Adapter string `json:"adapter,omitempty"` // the LoRA adapter applied unmerged, if any
	Backend string `json:"backend"`
	DType   string `json:"dtype"`
	Layers  int    `json:"layers"`
	Hidden  int    `json:"hidden_size"`
	Vocab   int    `json:"vocab_size"`

	CheckpointBytes         int64   `json:"checkpoint_bytes"` // bytes of the safetensors files
	PlainReadSeconds        float64 `json:"plain_read_seconds"`
	PlainReadBytesPerSecond float64 `json:"plain_read_bytes_per_second"`
	LoadSeconds             float64 `json:"load_seconds"`
	LoadBytesPerSecond      float64 `json:"load_bytes_per_second"` // checkpoint bytes / load seconds
	LoadReadRatio           float64 `json:"load_read_ratio"`       // load throughput / plain read throughput
	WeightBytes             int64   `json:"weight_bytes"`          // resident weights
	LoadPeakRSSBytes        int64   `json:"load_peak_rss_bytes"`   // peak RSS of the process up to the end of the load
	LoadPeakRSSWeightRatio  float64 `json:"load_peak_rss_weight_ratio"`
	PeakRSSBytes            int64   `json:"peak_rss_bytes"`  // peak RSS over load, compile, prefill and decode
	HugePageBytes           int64   `json:"huge_page_bytes"` // resident on transparent huge pages at the end of the load
	CompileSeconds          float64 `json:"compile_seconds"`
	CompiledGraphs          int     `json:"compiled_graphs"`
	Depth                   int     `json:"depth"`              // positions in the KV cache before the prompt
	DepthFill               string  `json:"depth_fill"`         // "prefill" or "zeros"
	DepthFillSeconds        float64 `json:"depth_fill_seconds"` // the prefill that filled it (the first run's), compile excluded; 0 for zeros
	KVCacheBytes            int64   `json:"kv_cache_bytes"`     // the timed run's KV cache: room for depth + prompt + decode positions, in whole blocks
	KVDType                 string  `json:"kv_dtype"`           // dtype of the stored keys and values
	PromptTokens            int     `json:"prompt_tokens"`
	PrefillSeconds          float64 `json:"prefill_seconds"`
	PrefillTokensPerSecond  float64 `json:"prefill_tokens_per_second"`
	TimeToFirstTokenSeconds float64 `json:"time_to_first_token_seconds"`      // prefill + picking the token, graphs compiled
	ColdTimeToFirstToken    float64 `json:"cold_time_to_first_token_seconds"` // the same on the first call, compile included
	DecodeTokens            int     `json:"decode_tokens"`
	DecodeSeconds           float64 `json:"decode_seconds"`
	DecodeTokensPerSecond   float64 `json:"decode_tokens_per_second"`
	DecodeMsPerToken        float64 `json:"decode_ms_per_token"`
	PrefillCores            float64 `json:"prefill_cores"` // CPU seconds per wall second: how many cores the prefill kept busy
	DecodeCores             float64 `json:"decode_cores"`  // the same for decoding; below GOMAXPROCS when other work shares the machine
	KVCacheBytesPerPosition int64   `json:"kv_cache_bytes_per_position"`
	// Reps is how many timed runs there were; the prefill and decode fields above are the
	// fastest run's, the medians and every run's speed follow.
	Reps                         int       `json:"reps"`
	PrefillTokensPerSecondMedian float64   `json:"prefill_tokens_per_second_median"`
	DecodeTokensPerSecondMedian  float64   `json:"decode_tokens_per_second_median"`
	PrefillTokensPerSecondRuns   []float64 `json:"prefill_tokens_per_second_runs"`
	DecodeTokensPerSecondRuns    []float64 `json:"decode_tokens_per_second_runs"`
	WeightBytesPerToken          int64     `json:"weight_bytes_per_token"` // weight bytes one decode step reads
	ReadBandwidthBytesPerSec     float64   `json:"read_bandwidth_bytes_per_second"`
	RooflineRatio                float64   `json:"roofline_ratio"` // weight bytes per token × decode tok/s ÷ read bandwidth
	// DecodeSteps is where a decode step's time went, on the pure-Go engine; absent on others.
	DecodeSteps *StepTimes `json:"decode_steps,omitempty"`
	// Batches is the batched-decode table (Options.Batches), by ascending batch size; absent
	// when not asked for.
	Batches []BatchRow `json:"batches,omitempty"`
}

// StepTimes is where the timed decode's steps spent their time on the pure-Go engine, per token
// (wall-clock; the step's parts run one after another): its products of the weights (operands
// prepared, panels shared out and multiplied, the slowest worker waited for), its attention, and
// the graph's other parts (compute's pieces, and the norms, RoPE, activations, sums and joins run
// in Go between them), and the graph's whole
// run. The rest of a token's time is outside the graph: the call, the cache and picking the
// token.
type StepTimes struct {
	ProductsMs  float64 `json:"products_ms_per_token"`
	AttentionMs float64 `json:"attention_ms_per_token"`
	PiecesMs    float64 `json:"other_parts_ms_per_token"`
	// GraphMs is the graph's whole run: the parts above and what the run does between them.
	GraphMs float64 `json:"graph_ms_per_token"`
	// ProductReadBytesPerSecond is the weights the products read over the time they took: the
	// products' own share of the read bandwidth.
	ProductReadBytesPerSecond float64 `json:"product_read_bytes_per_second"`
}

// newStepTimes is t spread over tokens decode steps; nil where t is unknown or there were none.
func newStepTimes(t *octlm.EngineTimes, tokens int) *StepTimes {
	if t == nil || tokens <= 0 {
		return nil
	}
	ms := func(d time.Duration) float64 { return 1000 * d.Seconds() / float64(tokens) }
	st := &StepTimes{ProductsMs: ms(t.Products), AttentionMs: ms(t.Attention), PiecesMs: ms(t.Pieces), GraphMs: ms(t.Graphs)}
	if t.Products > 0 {
		st.ProductReadBytesPerSecond = float64(t.ProductWeightBytes) / t.Products.Seconds()
	}
	return st
}

// engineWatch starts watching m's engine: the function it returns reports what the engine's step
// graphs spent since, or nil on an engine that does not time its steps.
func engineWatch(m *octlm.Model) func() *octlm.EngineTimes {
	before, ok := m.EngineTimes()
	return func() *octlm.EngineTimes {
		after, still := m.EngineTimes()
		if !ok || !still {
			return nil
		}
		spent := after.Sub(before)
		return &spent
	}
}

// BatchRow is the aggregate decode speed of Batch sequences decoded together: NextBatch steps
// on Batch caches, each step one token of every sequence, compile time taken out.
type BatchRow struct {
	Batch                 int     `json:"batch"`
	DecodeTokens          int     `json:"decode_tokens"` // tokens decoded per sequence
	DecodeSeconds         float64 `json:"decode_seconds"`
	DecodeTokensPerSecond float64 `json:"decode_tokens_per_second"` // Batch × DecodeTokens / DecodeSeconds
	DecodeMsPerStep       float64 `json:"decode_ms_per_step"`
	SpeedUp               float64 `json:"speed_up"` // DecodeTokensPerSecond over the Batch = 1 row's
	// Steps is where a step (one token of each sequence) spent its time, on the pure-Go engine;
	// absent on others.
	Steps *StepTimes `json:"steps,omitempty"`
}

// Run loads the checkpoint and measures it. The steps run in this order so that none disturbs
// another's numbers: a warm-up read of the files, a timed plain read, the timed load (peak RSS
// reset just before it), a warm-up generation that compiles the graphs, the timed prefill and
// decode on a fresh cache, and last the bandwidth read (its buffer would otherwise count in
// the peak RSS).
func Run(ctx context.Context, opts Options) (Result, error) {
	opts = withDefaults(opts)
	if opts.Backend == nil {
		return Result{}, errors.New("bench: no backend given")
	}
	r := newResult(opts)
	logf := func(format string, args ...any) {
		if opts.Log != nil {
			fmt.Fprintf(opts.Log, format+"\n", args...)
		}
	}
	if err := r.measurePlainRead(ctx, opts.Dir, logf); err != nil {
		return r, err
	}
	m, err := r.measureLoad(opts, logf)
	if err != nil {
		return r, err
	}
	defer m.Close()
	shape := m.Shape()
	if err := checkLengths(opts, shape.Context); err != nil {
		return r, err
	}
	ids := promptIDs(opts.Depth+opts.PromptTokens, shape.Vocab)
	fill, prompt := ids[:opts.Depth], ids[opts.Depth:]

	// Warm-up: compiles the prefill graph and the first decode graph.
	logf("compiling (warm-up prefill of %d tokens and one decode step)", len(prompt))
	warm, err := newCache(m, len(prompt)+opts.DecodeTokens, opts.KVDType)
	if err != nil {
		return r, err
	}
	cold, err := generate(ctx, m, warm, prompt, 2, nil)
	warm.Close()
	if err != nil {
		return r, err
	}
	r.ColdTimeToFirstToken = cold.firstTokenWall.Seconds()

	if err := r.measureRuns(ctx, m, opts, fill, prompt, logf); err != nil {
		return r, err
	}
	if err := r.measureBatches(ctx, m, opts, fill, prompt, logf); err != nil {
		return r, err
	}
	if err := ctx.Err(); err != nil {
		return r, err
	}
	if err := CheckBandwidthSize(opts.BandwidthBytes); err != nil {
		return r, err
	}
	logf("measuring read bandwidth (%s streamed by %d goroutines)", units.Bytes(opts.BandwidthBytes), r.GOMAXPROCS)
	r.ReadBandwidthBytesPerSec = ReadBandwidth(opts.BandwidthBytes, 3)
	r.RooflineRatio = float64(r.WeightBytesPerToken) * r.DecodeTokensPerSecond / r.ReadBandwidthBytesPerSec
	return r, nil
}

// newResult is the result's description of the machine, the build and the job, before any
// measurement.
func newResult(opts Options) Result {
	r := Result{
		Date:        time.Now().UTC().Format(time.RFC3339),
		CPUs:        runtime.NumCPU(),
		GOMAXPROCS:  runtime.GOMAXPROCS(0),
		MemoryBytes: sysinfo.MemTotal(),
		LoadAverage: sysinfo.LoadAverage(),
		GoVersion:   runtime.Version(),
		SIMD:        buildinfo.SIMD,
		Model:       opts.Dir,
		Adapter:     opts.AdapterName,
		Backend:     opts.BackendName,
		DType:       string(opts.DType),
	}
	r.Machine = fmt.Sprintf("%s, %d cores, %s", sysinfo.CPUModel(), r.CPUs, units.Bytes(r.MemoryBytes))
	return r
}

// measurePlainRead times a plain read of the checkpoint's files in dir, after a warm-up read so
// that the load and the read see the same page cache.
func (r *Result) measurePlainRead(ctx context.Context, dir string, logf func(string, ...any)) error {
	ckpt, err := loader.OpenCheckpoint(dir)
	if err != nil {
		return err
	}
	var paths []string
	for _, f := range ckpt.Files() {
		paths = append(paths, f.Path())
		r.CheckpointBytes += f.Size()
	}
	ckpt.Close()
	logf("reading %s of checkpoint files (warm-up, then timed)", units.Bytes(r.CheckpointBytes))
	if _, err := plainRead(paths); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	readTime, err := plainRead(paths)
	if err != nil {
		return err
	}
	r.PlainReadSeconds = readTime.Seconds()
	r.PlainReadBytesPerSecond = float64(r.CheckpointBytes) / readTime.Seconds()
	return nil
}

// measureLoad times the load (the peak RSS reset just before it) and returns the model.
func (r *Result) measureLoad(opts Options, logf func(string, ...any)) (*octlm.Model, error) {
	runtime.GC()
	debug.FreeOSMemory()
	if !sysinfo.ResetPeakRSS() {
		logf("note: cannot reset the peak RSS; it includes everything before the load")
	}
	logf("loading %s as %s", opts.Dir, opts.DType)
	begin := time.Now()
	m, err := octlm.Load(opts.Dir, octlm.LoadOptions{Backend: opts.Backend, DType: opts.DType, Adapter: opts.Adapter,
		Progress: func(_ string, done, total int64) {
			if opts.LoadProgress != nil {
				opts.LoadProgress(done, total)
			}
		},
		Warn: func(msg string) { logf("warning: %s", msg) }})
	if err != nil {
		return nil, err
	}
	loadTime := time.Since(begin)
	r.LoadPeakRSSBytes = sysinfo.PeakRSS()
	r.HugePageBytes = sysinfo.HugePageRSS()
	r.LoadSeconds = loadTime.Seconds()
	r.LoadBytesPerSecond = float64(r.CheckpointBytes) / loadTime.Seconds()
	r.LoadReadRatio = r.LoadBytesPerSecond / r.PlainReadBytesPerSecond
	r.WeightBytes = m.WeightBytes()
	r.WeightBytesPerToken = m.WeightBytes()
	r.LoadPeakRSSWeightRatio = float64(r.LoadPeakRSSBytes) / float64(r.WeightBytes)
	shape := m.Shape()
	r.Layers, r.Hidden, r.Vocab = shape.Layers, shape.Width, shape.Vocab
	return m, nil
}

// measureRuns makes the timed runs, each on a fresh cache that holds Depth positions first
// (steps that had to compile a new graph, as the attended length grows by buckets, have their
// compile time taken out), and records every run's speed, the medians, and the best prefill and
// the best decode (not necessarily of the same run).
func (r *Result) measureRuns(ctx context.Context, m *octlm.Model, opts Options, fill, prompt []int, logf func(string, ...any)) error {
	r.Depth, r.DepthFill, r.KVDType = opts.Depth, opts.DepthFill, string(opts.KVDType)
	if r.KVDType == "" {
		r.KVDType = string(m.GenerationCacheDType())
	}
	var runs []timing
	for i := range opts.Reps {
		t, err := timedRun(ctx, m, opts, fill, prompt, r, i, logf)
		if err != nil {
			return err
		}
		runs = append(runs, t)
		r.PrefillTokensPerSecondRuns = append(r.PrefillTokensPerSecondRuns, float64(len(prompt))/t.prefill.Seconds())
		r.DecodeTokensPerSecondRuns = append(r.DecodeTokensPerSecondRuns, float64(opts.DecodeTokens)/t.decode.Seconds())
	}
	r.Reps = opts.Reps
	r.PrefillTokensPerSecondMedian = median(r.PrefillTokensPerSecondRuns)
	r.DecodeTokensPerSecondMedian = median(r.DecodeTokensPerSecondRuns)
	run := runs[0]
	for _, t := range runs[1:] {
		if t.prefill < run.prefill {
			run.prefill, run.firstToken, run.prefillCPU = t.prefill, t.firstToken, t.prefillCPU
		}
		if t.decode < run.decode {
			run.decode, run.decodeCPU, run.decodeEngine = t.decode, t.decodeCPU, t.decodeEngine
		}
	}
	r.PeakRSSBytes = sysinfo.PeakRSS()
	stats := m.CompileStats()
	r.CompileSeconds, r.CompiledGraphs = stats.Time.Seconds(), stats.Graphs
	r.PromptTokens = len(prompt)
	r.PrefillSeconds = run.prefill.Seconds()
	r.PrefillTokensPerSecond = float64(len(prompt)) / run.prefill.Seconds()
	r.TimeToFirstTokenSeconds = run.firstToken.Seconds()
	r.DecodeTokens = opts.DecodeTokens
	r.DecodeSeconds = run.decode.Seconds()
	r.DecodeTokensPerSecond = float64(opts.DecodeTokens) / run.decode.Seconds()
	r.DecodeMsPerToken = 1000 * run.decode.Seconds() / float64(opts.DecodeTokens)
	r.DecodeSteps = newStepTimes(run.decodeEngine, opts.DecodeTokens)
	r.KVCacheBytesPerPosition = run.kvBytesPerPosition
	r.PrefillCores = run.prefillCPU.Seconds() / run.prefill.Seconds()
	r.DecodeCores = run.decodeCPU.Seconds() / run.decode.Seconds()
	return nil
}

// timedRun is timed run i of opts.Reps: a fresh cache, filled to opts.Depth with fill (the
// first run's fill time goes to r), then prompt and opts.DecodeTokens decode steps.
func timedRun(ctx context.Context, m *octlm.Model, opts Options, fill, prompt []int, r *Result, i int, logf func(string, ...any)) (timing, error) {
	cache, err := newCache(m, opts.Depth+len(prompt)+opts.DecodeTokens, opts.KVDType)
	if err != nil {
		return timing{}, err
	}
	defer cache.Close()
	r.KVCacheBytes = int64(cache.Capacity()) * cache.BytesPerPosition()
	run := ""
	if opts.Reps > 1 {
		run = fmt.Sprintf("run %d of %d: ", i+1, opts.Reps)
	}
	if opts.Depth > 0 {
		logf("%sfilling the KV cache to a depth of %d positions (%s)", run, opts.Depth, opts.DepthFill)
		seconds, err := fillCache(m, cache, fill, opts.DepthFill)
		if err != nil {
			return timing{}, err
		}
		if i == 0 {
			r.DepthFillSeconds = seconds
		}
	}
	logf("%sprefill %d tokens, then decode %d", run, len(prompt), opts.DecodeTokens)
	return generate(ctx, m, cache, prompt, opts.DecodeTokens+1, opts.Log)
}

// measureBatches fills r.Batches: for each batch size (1 added, ascending, each once), the
// aggregate decode speed of that many sequences decoded together.
func (r *Result) measureBatches(ctx context.Context, m *octlm.Model, opts Options, fill, prompt []int, logf func(string, ...any)) error {
	if len(opts.Batches) == 0 {
		return nil
	}
	sizes := slices.Sorted(slices.Values(append([]int{1}, opts.Batches...)))
	sizes = slices.Compact(sizes)
	for _, b := range sizes {
		if err := ctx.Err(); err != nil {
			return err
		}
		if b < 1 {
			return fmt.Errorf("bench: batch size %d: %w", b, octlm.ErrBadInput)
		}
		logf("batch %d: prefill %d sequences of %d tokens, then decode %d tokens each", b, b, len(prompt), opts.DecodeTokens)
		d, engine, err := batchDecode(ctx, m, opts, fill, prompt, b)
		if err != nil {
			return fmt.Errorf("bench: batch %d: %w", b, err)
		}
		row := BatchRow{Batch: b, DecodeTokens: opts.DecodeTokens, DecodeSeconds: d.Seconds(),
			DecodeTokensPerSecond: float64(b*opts.DecodeTokens) / d.Seconds(),
			DecodeMsPerStep:       1000 * d.Seconds() / float64(opts.DecodeTokens)}
		row.Steps = newStepTimes(engine, opts.DecodeTokens)
		row.SpeedUp = row.DecodeTokensPerSecond / cmp.Or(r.batchBaseline(), row.DecodeTokensPerSecond)
		r.Batches = append(r.Batches, row)
	}
	return nil
}

// batchBaseline is the aggregate decode speed of the batch-1 row, 0 before it is measured.
func (r *Result) batchBaseline() float64 {
	for _, row := range r.Batches {
		if row.Batch == 1 {
			return row.DecodeTokensPerSecond
		}
	}
	return 0
}

// batchDecode runs b sequences, each the prompt on top of opts.Depth positions (fill) on its
// own cache, prefilled together, then one untimed decode step (it compiles the batch's decode
// graph and runs it once), then opts.DecodeTokens greedy NextBatch steps, and returns the time
// of those steps with graph compilation taken out, and where they spent it on the pure-Go engine
// (nil on others).
func batchDecode(ctx context.Context, m *octlm.Model, opts Options, fill, prompt []int, b int) (time.Duration, *octlm.EngineTimes, error) {
	caches := make([]*octlm.Cache, 0, b)
	defer func() {
		for _, c := range caches {
			c.Close()
		}
	}()
	seqs := make([][]int, b)
	for i := range b {
		c, err := newCache(m, opts.Depth+len(prompt)+1+opts.DecodeTokens, opts.KVDType)
		if err != nil {
			return 0, nil, err
		}
		caches = append(caches, c)
		if len(fill) > 0 {
			if _, err := fillCache(m, c, fill, opts.DepthFill); err != nil {
				return 0, nil, err
			}
		}
		seqs[i] = prompt
	}
	logits, err := m.NextBatch(seqs, caches)
	if err != nil {
		return 0, nil, err
	}
	step := func() error {
		for i, l := range logits {
			seqs[i] = []int{octlm.Argmax(l)}
		}
		logits, err = m.NextBatchInto(seqs, caches, logits)
		return err
	}
	if err := step(); err != nil {
		return 0, nil, err
	}
	compiled := m.CompileStats().Time
	spent := engineWatch(m)
	begin := time.Now()
	for range opts.DecodeTokens {
		if err := ctx.Err(); err != nil {
			return 0, nil, err
		}
		if err := step(); err != nil {
			return 0, nil, err
		}
	}
	return time.Since(begin) - (m.CompileStats().Time - compiled), spent(), nil
}

// checkLengths refuses depth + prompt + decode positions (one more with Batches) past the
// context length (an *octlm.ContextError) and fill methods it does not know, without overflowing int.
func checkLengths(o Options, contextLength int) error {
	if o.DepthFill != FillPrefill && o.DepthFill != FillZeros {
		return fmt.Errorf("bench: unknown depth fill %q (want %s or %s): %w", o.DepthFill, FillPrefill, FillZeros, octlm.ErrBadInput)
	}
	if o.Depth < 0 {
		return fmt.Errorf("bench: negative depth %d: %w", o.Depth, octlm.ErrBadInput)
	}
	total := 0
	for _, n := range []int{o.Depth, o.PromptTokens, o.DecodeTokens} {
		if n > contextLength-total {
			return &octlm.ContextError{Positions: total + min(n, math.MaxInt-total), ContextLength: contextLength}
		}
		total += n
	}
	if len(o.Batches) > 0 && total == contextLength { // the batched decode's untimed warm-up step takes one more
		return &octlm.ContextError{Positions: total + 1, ContextLength: contextLength}
	}
	return nil
}

// newCache is a KV cache of capacity positions in dtype, or where "" in the dtype generation
// stores its cache in (Model.GenerationCacheDType: float16 under float32 weights on the go
// engine, as llama.cpp's bench stores its own).
func newCache(m *octlm.Model, capacity int, dtype octlm.DType) (*octlm.Cache, error) {
	return m.NewGenerationCache(capacity, octlm.GenerateOptions{KVDType: dtype})
}

// fillCache fills cache with ids' positions (FillPrefill: one prefill, its time returned with
// compilation taken out) or as many zero positions (FillZeros).
func fillCache(m *octlm.Model, cache *octlm.Cache, ids []int, how string) (float64, error) {
	if how == FillZeros {
		return 0, cache.Pad(len(ids))
	}
	compiled := m.CompileStats().Time
	begin := time.Now()
	if _, err := m.Next(ids, cache); err != nil {
		return 0, err
	}
	return (time.Since(begin) - (m.CompileStats().Time - compiled)).Seconds(), nil
}

// median is the middle value of xs (the mean of the two middle ones for an even count).
func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func withDefaults(o Options) Options {
	if o.DType == "" {
		o.DType = octlm.Float32
	}
	if o.PromptTokens <= 0 {
		o.PromptTokens = 128
	}
	if o.DecodeTokens <= 0 {
		o.DecodeTokens = 64
	}
	if o.BandwidthBytes <= 0 {
		o.BandwidthBytes = MinBandwidthBytes
	}
	if o.DepthFill == "" {
		o.DepthFill = FillPrefill
	}
	if o.Reps <= 0 {
		o.Reps = 1
	}
	return o
}

// promptIDs is a fixed pseudo-random prompt of n token IDs below vocab (the speed of a
// decoder does not depend on which tokens it reads).
func promptIDs(n, vocab int) []int {
	ids := make([]int, n)
	x := uint32(2463534242)
	for i := range ids {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		ids[i] = int(x % uint32(vocab))
	}
	return ids
}

// timing is one generation's wall times with graph compilation taken out.
type timing struct {
	prefill, firstToken, decode time.Duration
	decodeEngine                *octlm.EngineTimes // where the decode calls' step graphs spent their time; nil unknown
	firstTokenWall              time.Duration      // compile included
	prefillCPU, decodeCPU       time.Duration      // process CPU time over the same calls
	kvBytesPerPosition          int64
}

// generate runs greedy generation of n tokens on top of cache: the prompt in one call, then
// one token per call, picking each token on the host as Generate does. It subtracts from each
// call the time the model spent compiling during it.
func generate(ctx context.Context, m *octlm.Model, cache *octlm.Cache, prompt []int, n int, log io.Writer) (timing, error) {
	var t timing
	t.kvBytesPerPosition = cache.BytesPerPosition()
	compiled := m.CompileStats().Time
	var wall, cpu time.Duration
	var logits []float32 // the last step's, written over by the next as Generate does
	step := func(ids []int) (int, time.Duration, error) {
		cpu0 := cpuTime()
		begin := time.Now()
		var err error
		if logits, err = m.NextInto(ids, cache, logits); err != nil {
			return 0, 0, err
		}
		id := octlm.Argmax(logits)
		wall = time.Since(begin)
		cpu = cpuTime() - cpu0
		now := m.CompileStats().Time
		took := wall - (now - compiled)
		compiled = now
		return id, took, nil
	}
	id, took, err := step(prompt)
	if err != nil {
		return t, err
	}
	t.prefill, t.firstToken, t.firstTokenWall, t.prefillCPU = took, took, wall, cpu
	spent := engineWatch(m)
	lastLog := time.Now()
	for i := 1; i < n; i++ {
		if err := ctx.Err(); err != nil {
			return t, err
		}
		if id, took, err = step([]int{id}); err != nil {
			return t, err
		}
		t.decode += took
		t.decodeCPU += cpu
		if log != nil && (time.Since(lastLog) > 5*time.Second || i == n-1) {
			fmt.Fprintf(log, "  decoded %d/%d tokens, %.1f ms/token\n", i, n-1, 1000*t.decode.Seconds()/float64(i))
			lastLog = time.Now()
		}
	}
	t.decodeEngine = spent()
	return t, nil
}

// plainRead reads every file front to back with a 1 MiB buffer, as cat would: the floor a
// loader is measured against.
func plainRead(paths []string) (time.Duration, error) {
	buf := make([]byte, 1<<20)
	begin := time.Now()
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return 0, fmt.Errorf("bench: %w", err)
		}
		_, err = io.CopyBuffer(io.Discard, struct{ io.Reader }{f}, buf)
		f.Close()
		if err != nil {
			return 0, fmt.Errorf("bench: reading %s: %w", p, err)
		}
	}
	return time.Since(begin), nil
}
