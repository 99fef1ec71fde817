package octlm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/shapes"
	"github.com/gomlx/gomlx/core/graph"
	"github.com/gomlx/gomlx/core/tensors"

	"github.com/octlm/octlm/internal/hostproduct"
)

// DType is the dtype of resident weights and activations.
type DType string

// The dtypes a model can run in. Float32 is the parity dtype.
const (
	Float32  DType = "f32"
	BFloat16 DType = "bf16"
	Float16  DType = "f16"
)

// ParseDType accepts f32/float32, bf16/bfloat16 and f16/float16.
func ParseDType(s string) (DType, error) {
	switch s {
	case "f32", "float32", "":
		return Float32, nil
	case "bf16", "bfloat16":
		return BFloat16, nil
	case "f16", "float16":
		return Float16, nil
	}
	return "", fmt.Errorf("octlm: unknown dtype %q (want f32, bf16 or f16)", s)
}

func (d DType) gomlx() dtypes.DType {
	switch d {
	case BFloat16:
		return dtypes.BFloat16
	case Float16:
		return dtypes.Float16
	}
	return dtypes.Float32
}

// Model is a decoder with its weights resident on a backend, ready to run.
type Model struct {
	DType   DType
	Backend compute.Backend

	arch    architecture
	shape   Shape // the architecture's, what the shared machinery reads
	layout  Layout
	specs   []weightSpec      // the architecture's weight table
	adapter *LoRA             // applied unmerged in the step graph; nil: none
	weights []*tensors.Tensor // one per spec, in the layout
	// embedding is the index in weights of the embedding table (the first of the
	// architecture's sizeNames), which Layout.HostEmbed reads.
	embedding int
	chunks    ChunkOptions

	mu      sync.Mutex           // guards step compilation and runs
	steps   map[string]*stepExec // the step graph compiled for each set of argument shapes
	used    int64                // counts runs, for stepExec.lastUse
	compile CompileStats
}

// stepExec is the step graph compiled for one set of argument shapes.
type stepExec struct {
	exec    *graph.Exec
	graph   *graph.Graph // exec's one graph, run directly (stepExec.call)
	lastUse int64
}

// maxStepGraphs bounds the compiled step graphs a model keeps; past it the least recently used
// is freed. A graph is one ONNX Runtime session with its own thread pool, kernels and buffers:
// `octlm parity --model testdata/tiny-qwen3-long` (40,960 positions) compiles about a hundred
// (every chunk length × attended length × cache capacity) and kept them all: 1.90 GiB with ONNX
// Runtime's arena off (66 threads), 898 MiB keeping 16 (parity unchanged). Decoding needs one
// graph per attended length bucket, a prefill one per chunk length, so a generation reuses a
// handful.
const maxStepGraphs = 16

// CompileStats counts the step graphs a model has compiled (one per chunk length, attended
// length and cache capacity bucket) and the time spent building and compiling them.
type CompileStats struct {
	Graphs int
	Time   time.Duration
}

// CompileStats reports the graph compilations so far. Runs that compile include that time, so
// a benchmark subtracts it to time the computation alone.
func (m *Model) CompileStats() CompileStats {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.compile
}

// EngineTimes is where the pure-Go engine's step graphs spent their time: its products, its
// attention and the rest (internal/hostproduct's Times).
type EngineTimes = hostproduct.Times

// EngineTimes reports where the step graphs have spent their time so far on the pure-Go engine
// (a snapshot: subtract an earlier one with Sub); ok is false on any other engine, which does
// not time its steps.
func (m *Model) EngineTimes() (t EngineTimes, ok bool) {
	hb, ok := m.Backend.(*hostproduct.Backend)
	if !ok {
		return t, false
	}
	return hb.Times(), true
}

// Close frees the model's resident weights and compiled graphs.
func (m *Model) Close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for key, s := range m.steps {
		s.exec.Finalize()
		delete(m.steps, key)
	}
	for _, t := range m.weights {
		if t != nil {
			_ = t.FinalizeAll()
		}
	}
	m.weights = nil
}

// embeddingTensors is the resident embedding table: the whole weight, or its pieces of rows
// in order (Layout.PieceMACs).
func (m *Model) embeddingTensors() []*tensors.Tensor {
	n := 1
	if of := m.specs[m.embedding].Of; of != "" {
		for n < len(m.specs)-m.embedding && m.specs[m.embedding+n].Of == of {
			n++
		}
	}
	return m.weights[m.embedding : m.embedding+n]
}

// WeightBytes is the size of the resident weights.
func (m *Model) WeightBytes() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	var n int64
	for _, t := range m.weights {
		n += int64(t.Shape().ByteSize())
	}
	return n
}

// Shape is the model's shape as the shared machinery reads it, whatever the architecture.
func (m *Model) Shape() Shape { return m.shape }

// Qwen3Config is a Qwen3 model's whole configuration (RoPE switches, head width, eps); false for
// another architecture, whose sizes Shape has.
func (m *Model) Qwen3Config() (Config, bool) {
	q, ok := m.arch.(qwen3)
	return q.c, ok
}

// Logits holds float32 logits, row-major [Rows, Vocab].
type Logits struct {
	Rows, Vocab int
	Data        []float32
}

// Row returns the logits of row i.
func (l Logits) Row(i int) []float32 { return l.Data[i*l.Vocab : (i+1)*l.Vocab] }

// Forward is the full path: the whole prompt in one call, logits for every position.
func (m *Model) Forward(ids []int) (Logits, error) {
	cache, err := m.NewCache(len(ids))
	if err != nil {
		return Logits{}, err
	}
	defer cache.Close()
	return m.ForwardCached(ids, cache)
}

// ForwardCached is the cached path: it runs ids on top of what cache holds, appends their
// state (keys and values) to it, and returns logits for every position of ids.
func (m *Model) ForwardCached(ids []int, cache *Cache) (Logits, error) {
	rows := make([]int, len(ids))
	for i := range rows {
		rows[i] = i
	}
	return m.run(ids, cache, rows, nil)
}

// Next runs ids on top of cache and returns the logits of the last position only: the step
// generation uses, which skips the vocabulary projection for every other row.
func (m *Model) Next(ids []int, cache *Cache) ([]float32, error) {
	return m.NextInto(ids, cache, nil)
}

// NextInto is Next writing the logits into into where it has the room: a decoding loop gives
// back the last step's logits, done with them (see NextBatchInto).
func (m *Model) NextInto(ids []int, cache *Cache, into []float32) ([]float32, error) {
	l, err := m.run(ids, cache, []int{len(ids) - 1}, into)
	if err != nil {
		return nil, err
	}
	return l.Data, nil
}

// ErrBadInput marks token IDs or lengths the model cannot take.
var ErrBadInput = errors.New("bad input")

func (m *Model) checkIDs(ids []int, cache *Cache) error {
	if len(ids) == 0 {
		return fmt.Errorf("octlm: empty token sequence: %w", ErrBadInput)
	}
	for i, id := range ids {
		if id < 0 || id >= m.shape.Vocab {
			return fmt.Errorf("octlm: token %d at position %d is outside the vocabulary [0, %d): %w",
				id, i, m.shape.Vocab, ErrBadInput)
		}
	}
	if len(ids) > m.shape.Context-cache.Len() {
		return &ContextError{Positions: cache.Len() + len(ids), ContextLength: m.shape.Context}
	}
	return nil
}

// ContextError is a run or a generation that needs more positions than the model's context
// length (config.json's max_position_embeddings). It matches ErrBadInput.
type ContextError struct {
	Positions     int // positions the request needs in all
	ContextLength int
	// Prompt and NewTokens split Positions for a generation; both are zero otherwise.
	Prompt, NewTokens int
}

func (e *ContextError) Error() string {
	if e.NewTokens > 0 {
		return fmt.Sprintf("octlm: a prompt of %d tokens plus %d new tokens exceeds the context length %d by %d",
			e.Prompt, e.NewTokens, e.ContextLength, e.Positions-e.ContextLength)
	}
	return fmt.Sprintf("octlm: %d positions exceed the context length %d", e.Positions, e.ContextLength)
}

// Is makes errors.Is(err, ErrBadInput) true.
func (e *ContextError) Is(target error) bool { return target == ErrBadInput }

// run executes ids on top of cache and returns the logits of the given rows (ascending), in into
// where it has the room: runBatch of one sequence.
func (m *Model) run(ids []int, cache *Cache, rows []int, into []float32) (Logits, error) {
	out, err := m.runBatch([][]int{ids}, []*Cache{cache}, [][]int{rows}, [][]float32{into})
	if err != nil {
		return Logits{}, err
	}
	return out[0], nil
}

// Chunk sizes of the prefill: a chunk of n rows attending over Lb cache slots holds attention
// scores of NHeads·n·Lb float32 values (and a few temporaries of that size); chunkRows keeps
// that product under attentionBudget, between ChunkOptions.MinRows and MaxRows rows, in powers of
// two so that the chunks share compiled graphs. On tiny-qwen3-long at 40,960 positions a budget
// of 8 Mi values peaked at 943 MiB RSS, 2 Mi at 469 MiB in the same time, and 0.5 Mi was slower.
const attentionBudget = 1 << 22 // score values of one chunk: 16 MiB in float32

// ChunkOptions bound the rows of one prefill chunk; zero fields take the defaults
// (defaultMinChunkRows, defaultMaxChunkRows). Tests force chunks of a few rows with them.
type ChunkOptions struct {
	MinRows, MaxRows int
}

// Default chunk bounds: 1,024 rows is the largest chunk that kept prefill speed on Qwen3-0.6B
// while the budget above bounds long prompts' memory; 32 rows keeps the deepest chunks' products
// large enough for the matmul kernels.
const defaultMinChunkRows, defaultMaxChunkRows = 32, 1024

// withDefaults fills zero fields.
func (c ChunkOptions) withDefaults() ChunkOptions {
	if c.MinRows <= 0 {
		c.MinRows = defaultMinChunkRows
	}
	if c.MaxRows <= 0 {
		c.MaxRows = defaultMaxChunkRows
	}
	c.MinRows = min(c.MinRows, c.MaxRows)
	return c
}

// chunkRows is the number of rows of the next prefill chunk on a cache holding start
// positions with the given capacity.
func (m *Model) chunkRows(start, capacity int) int {
	rows := m.chunks.MaxRows
	for rows > m.chunks.MinRows && m.shape.Heads*rows*attendLength(start+rows, capacity) > attentionBudget {
		rows /= 2
	}
	return rows
}

// attendLength is the number of cache slots a chunk ending at position end attends over,
// capped by the cache: a length bucket, so that decoding compiles a new graph only now and
// then, and past attendStep positions the next multiple of attendStep, so that long prompts
// do not attend over up to a third more slots than they hold.
func attendLength(end, capacity int) int {
	n := lengthBucket(end)
	if end > attendStep {
		n = (end + attendStep - 1) / attendStep * attendStep
	}
	return min(n, capacity)
}

// attendStep is the granularity of attended lengths past it (see attendLength).
const attendStep = 1024

// compileFor returns the step graph for a cache of kvDType compiled for the shapes of args,
// compiling it unless it already has been (freeing the least recently used beyond
// maxStepGraphs), and accounts for the time taken.
func (m *Model) compileFor(args []*tensors.Tensor, kvDType dtypes.DType) (*stepExec, error) {
	shapesOf := func(ts []*tensors.Tensor) []shapes.Shape {
		out := make([]shapes.Shape, len(ts))
		for i, t := range ts {
			out[i] = t.Shape()
		}
		return out
	}
	// The weights' shapes never change: the key leaves them out, and they are read only to compile.
	key := stepKey(kvDType, shapesOf(args[:numStepInputs]), shapesOf(args[numStepInputs+len(m.weights):]))
	m.used++
	if s, ok := m.steps[key]; ok {
		s.lastUse = m.used
		return s, nil
	}
	if m.steps == nil {
		m.steps = map[string]*stepExec{}
	}
	for len(m.steps) >= maxStepGraphs {
		oldest := ""
		for k, s := range m.steps {
			if oldest == "" || s.lastUse < m.steps[oldest].lastUse {
				oldest = k
			}
		}
		m.steps[oldest].exec.Finalize()
		delete(m.steps, oldest)
	}
	argShapes := shapesOf(args)
	begin := time.Now()
	exec, err := graph.NewExec(m.Backend, func(g *graph.Graph, inputs []*graph.Node) []*graph.Node {
		return m.stepGraph(g, inputs, kvDType)
	})
	if err != nil {
		return nil, fmt.Errorf("octlm: building the step graph: %w", err)
	}
	exec = exec.WithName("octlm_step")
	g, err := exec.Compile(argShapes...)
	if err != nil {
		exec.Finalize()
		return nil, fmt.Errorf("octlm: compiling the step graph for inputs %v and %d cache tensors: %w", argShapes[:numStepInputs], len(args)-numStepInputs-len(m.weights), err)
	}
	s := &stepExec{exec: exec, graph: g, lastUse: m.used}
	m.steps[key] = s
	m.compile.Graphs++
	m.compile.Time += time.Since(begin)
	return s, nil
}

// stepKey is the compiled step graphs' key for a step's dtype of the cache and the shapes of its
// inputs and of the caches' tensors: each dtype and dimension as bytes, not as text (fmt over the
// 1,344 cache blocks of an 8-sequence step took about 0.5 ms a step).
func stepKey(kvDType dtypes.DType, inputs, caches []shapes.Shape) string {
	key := binary.AppendUvarint(nil, uint64(kvDType))
	for _, part := range [][]shapes.Shape{inputs, caches} {
		key = binary.AppendUvarint(key, uint64(len(part)))
		for _, s := range part {
			key = binary.AppendUvarint(binary.AppendUvarint(key, uint64(s.DType)), uint64(len(s.Dimensions)))
			for _, d := range s.Dimensions {
				key = binary.AppendUvarint(key, uint64(d))
			}
		}
	}
	return string(key)
}

// lengthBucket rounds n up to 1, 2, 4, 8, 16, then 24, 32, 48, 64, 96, …: powers of two and
// one and a half times powers of two, so a new length seldom recompiles and padding wastes at
// most a third.
func lengthBucket(n int) int {
	b := 1
	for b < n {
		if b >= 16 && b+b/2 >= n {
			return b + b/2
		}
		b *= 2
	}
	return b
}
