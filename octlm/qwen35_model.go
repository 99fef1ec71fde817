package octlm

// Qwen3.5's weight table, loading, cache and forward paths. The graph is in qwen35_graph.go.

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/dtypes/bfloat16"
	"github.com/gomlx/compute/dtypes/float16"
	"github.com/gomlx/compute/shapes"
	"github.com/gomlx/gomlx/core/graph"
	"github.com/gomlx/gomlx/core/tensors"

	"github.com/octlm/octlm/loader"
)

// q35Spec is one text-decoder weight: its checkpoint name and shape (as stored: Linear
// weights [out, in]), and whether it stays float32 whatever the model's dtype (norms, the
// DeltaNet's gates and convolution: small, and the reference computes them in float32).
type q35Spec struct {
	Name    string
	Shape   []int
	Float32 bool
	Kind    weightKind // vectorWeight (as stored), columnWeight (Linear) or embeddingWeight
}

// Qwen35SkippedPrefixes are the tensors a text decoder does not use: the vision tower and the
// multi-token-prediction head. Load counts them without reading their bytes.
var Qwen35SkippedPrefixes = []string{"model.visual.", "mtp."}

// qwen35WeightSpecs lists the decoder's weights in the order the step graph takes them.
func qwen35WeightSpecs(c Qwen35Config) []q35Spec {
	p := c.WeightPrefix()
	d := c.Hidden
	vec := func(name string, n int) q35Spec { return q35Spec{Name: name, Shape: []int{n}, Float32: true} }
	lin := func(name string, out, in int) q35Spec {
		return q35Spec{Name: name, Shape: []int{out, in}, Kind: columnWeight}
	}
	table := func(name string) q35Spec {
		return q35Spec{Name: name, Shape: []int{c.VocabSize, d}, Kind: embeddingWeight}
	}
	specs := []q35Spec{table(p + "embed_tokens.weight"), vec(p+"norm.weight", d)}
	if !c.Tied {
		specs = append(specs, table(TiedHeadName))
	}
	for i, t := range c.LayerTypes {
		l := fmt.Sprintf("%slayers.%d.", p, i)
		specs = append(specs,
			vec(l+"input_layernorm.weight", d), vec(l+"post_attention_layernorm.weight", d),
			lin(l+"mlp.gate_proj.weight", c.FF, d), lin(l+"mlp.up_proj.weight", c.FF, d), lin(l+"mlp.down_proj.weight", d, c.FF))
		if t == FullAttention {
			a := l + "self_attn."
			specs = append(specs,
				lin(a+"q_proj.weight", 2*c.Heads*c.HeadDim, d), lin(a+"k_proj.weight", c.KVHeads*c.HeadDim, d),
				lin(a+"v_proj.weight", c.KVHeads*c.HeadDim, d), lin(a+"o_proj.weight", d, c.Heads*c.HeadDim),
				vec(a+"q_norm.weight", c.HeadDim), vec(a+"k_norm.weight", c.HeadDim))
			continue
		}
		a := l + "linear_attn."
		specs = append(specs,
			lin(a+"in_proj_qkv.weight", c.ConvDim(), d), lin(a+"in_proj_z.weight", c.ValueDim(), d),
			lin(a+"in_proj_b.weight", c.LinValueHeads, d), lin(a+"in_proj_a.weight", c.LinValueHeads, d),
			q35Spec{Name: a + "conv1d.weight", Shape: []int{c.ConvDim(), 1, c.ConvKernel}, Float32: true},
			vec(a+"A_log", c.LinValueHeads), vec(a+"dt_bias", c.LinValueHeads), vec(a+"norm.weight", c.LinValueDim),
			lin(a+"out_proj.weight", d, c.ValueDim()))
	}
	return specs
}

// SkippedTensors counts the checkpoint tensors a load left unread, by prefix.
type SkippedTensors struct {
	Prefix string
	Count  int
	Bytes  int64
}

// Qwen35Model is a Qwen3.5 text decoder with its weights resident on a backend.
type Qwen35Model struct {
	Config  Qwen35Config
	DType   DType
	Backend compute.Backend
	// Skipped are the vision and MTP tensors the load counted but did not read.
	Skipped []SkippedTensors

	specs   []q35Spec
	weights []*tensors.Tensor
	// embedColumns stores embed_tokens (and an untied lm_head) as columns [hidden, vocab] (the
	// pure-Go backend's layout, see layoutFor), else as rows [vocab, hidden]; embedSlices looks
	// the rows up one slice per token (ONNX Runtime; see embed in graph.go).
	embedColumns, embedSlices bool

	mu       sync.Mutex
	execs    [2]*graph.Exec // the step, without and with the hidden-state trace
	compiled map[string]bool
	compile  CompileStats
}

// LoadQwen35 reads a Qwen3.5 checkpoint folder (config.json and model.safetensors, or a
// sharded index).
func LoadQwen35(dir string, opts LoadOptions) (*Qwen35Model, error) {
	cfg, err := ReadQwen35Config(filepath.Join(dir, "config.json"))
	if err != nil {
		return nil, err
	}
	ckpt, err := loader.OpenCheckpoint(dir)
	if err != nil {
		return nil, err
	}
	defer ckpt.Close()
	if opts.Warn != nil {
		for _, w := range ckpt.Warnings() {
			opts.Warn(w)
		}
	}
	return LoadQwen35Checkpoint(cfg, ckpt, opts)
}

// CheckQwen35Checkpoint checks ckpt's tensors against cfg without reading weight bytes: every
// decoder weight present with its shape, nothing unexpected, the vision and MTP tensors
// counted. A tied model may store lm_head.weight only as a copy of the embedding.
func CheckQwen35Checkpoint(cfg Qwen35Config, ckpt *loader.Checkpoint) (skipped []SkippedTensors, err error) {
	specs := qwen35WeightSpecs(cfg)
	want := make(map[string][]int, len(specs))
	for _, s := range specs {
		want[s.Name] = s.Shape
	}
	counts := make([]SkippedTensors, len(Qwen35SkippedPrefixes))
	for i, p := range Qwen35SkippedPrefixes {
		counts[i].Prefix = p
	}
	seen := 0
	for e, ierr := range ckpt.Tensors() {
		if ierr != nil {
			return nil, ierr
		}
		name := e.Info.Name
		if shape, ok := want[name]; ok {
			if !sameShape(e.Info.Shape, shape) {
				return nil, fmt.Errorf("octlm: %s: tensor %q has shape %v, config.json implies %v", ckpt.Dir(), name, e.Info.Shape, shape)
			}
			if !floatDType(e.Info.DType) {
				return nil, fmt.Errorf("octlm: %s: tensor %q has dtype %s (want F32, BF16 or F16)", ckpt.Dir(), name, e.Info.DType)
			}
			seen++
			continue
		}
		skip := false
		for i, p := range Qwen35SkippedPrefixes {
			if strings.HasPrefix(name, p) {
				counts[i].Count++
				counts[i].Bytes += e.Info.Size
				skip = true
			}
		}
		if skip {
			continue
		}
		if cfg.Tied && name == TiedHeadName {
			emb, _ := ckpt.Lookup(specs[0].Name)
			if same, err := loader.SameData(e, emb); err != nil || !same {
				return nil, fmt.Errorf("octlm: %s: tie_word_embeddings is true but %s differs from %s", ckpt.Dir(), TiedHeadName, specs[0].Name)
			}
			continue
		}
		return nil, fmt.Errorf("octlm: %s: unexpected checkpoint tensor %q for a Qwen3.5 text decoder (%s)", ckpt.Dir(), name, cfg.Summary())
	}
	if seen != len(specs) {
		for _, s := range specs {
			if _, ok := ckpt.Lookup(s.Name); !ok {
				return nil, fmt.Errorf("octlm: %s: missing checkpoint tensor %q", ckpt.Dir(), s.Name)
			}
		}
	}
	return counts, nil
}

func floatDType(d loader.DType) bool {
	return d == loader.F32 || d == loader.BF16 || d == loader.F16
}

func sameShape(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// LoadQwen35Checkpoint checks ckpt against cfg, then streams the decoder's tensors into
// resident backend buffers one at a time; the vision and MTP tensors are skipped unread. On
// any error nothing stays allocated.
func LoadQwen35Checkpoint(cfg Qwen35Config, ckpt *loader.Checkpoint, opts LoadOptions) (m *Qwen35Model, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if opts.Backend == nil {
		return nil, fmt.Errorf("octlm: load: no backend given")
	}
	skipped, err := CheckQwen35Checkpoint(cfg, ckpt)
	if err != nil {
		return nil, err
	}
	dtype := opts.DType
	if dtype == "" {
		dtype = Float32
	}
	m = &Qwen35Model{Config: cfg, DType: dtype, Backend: opts.Backend, Skipped: skipped, specs: qwen35WeightSpecs(cfg)}
	lay := layoutFor(opts.Backend)
	m.embedColumns, m.embedSlices = lay.headRows == headColumns, lay.embedSlices
	defer func() {
		if err != nil {
			m.Close()
			m = nil
		}
	}()
	var total, done int64
	for _, s := range m.specs {
		e, _ := ckpt.Lookup(s.Name)
		total += e.Info.Size
	}
	var scratch []float32
	for _, s := range m.specs {
		e, _ := ckpt.Lookup(s.Name)
		wd := dtype
		if s.Float32 {
			wd = Float32
		}
		// Linear weights are stored transposed, [in, out], for a plain x·W (see layoutFor).
		transpose := s.Kind == columnWeight || s.Kind == embeddingWeight && m.embedColumns
		t, err := q35Resident(opts.Backend, e, s.Shape, wd, transpose, &scratch)
		if err != nil {
			return nil, fmt.Errorf("octlm: loading %s: %w", s.Name, err)
		}
		m.weights = append(m.weights, t)
		done += e.Info.Size
		if opts.Progress != nil {
			opts.Progress(s.Name, done, total)
		}
	}
	return m, nil
}

// q35Resident reads the checkpoint tensor e into a resident tensor of the given shape and
// dtype: straight into the backend's buffer where it shares host memory (float32), else
// through scratch.
func q35Resident(backend compute.Backend, e loader.Entry, dims []int, dtype DType, transpose bool, scratch *[]float32) (*tensors.Tensor, error) {
	shape := shapes.Make(dtype.gomlx(), dims...)
	if transpose {
		shape = shapes.Make(dtype.gomlx(), dims[1], dims[0])
	}
	var buffer compute.Buffer
	var flat any
	var err error
	if backend.HasSharedBuffers() {
		if buffer, flat, err = backend.NewSharedBuffer(0, shape); err != nil {
			return nil, fmt.Errorf("allocating %s: %w", shape, err)
		}
	} else {
		flat = dtypes.MakeAnySlice(shape.DType, shape.Size())
	}
	fail := func(err error) (*tensors.Tensor, error) {
		if buffer != nil {
			_ = buffer.Finalize()
		}
		return nil, err
	}
	n := e.Info.NumElements()
	if transpose {
		// fillColumns turns a [rows, cols] tensor into [cols, rows], a bounded block at a time.
		if err := fillColumns(flat, weightSpec{Name: e.Info.Name, HubShape: dims}, e, scratch); err != nil {
			return fail(err)
		}
	} else if dst, ok := flat.([]float32); ok {
		if err := e.File.ReadFloat32(e.Info, dst); err != nil {
			return fail(err)
		}
	} else {
		if cap(*scratch) < n {
			*scratch = make([]float32, n)
		}
		values := (*scratch)[:n]
		if err := e.File.ReadFloat32(e.Info, values); err != nil {
			return fail(err)
		}
		switch dst := flat.(type) {
		case []bfloat16.BFloat16:
			for i, v := range values {
				dst[i] = bfloat16.FromFloat32(v)
			}
		case []float16.Float16:
			for i, v := range values {
				dst[i] = float16.FromFloat32(v)
			}
		default:
			return fail(fmt.Errorf("unexpected resident dtype %s", shape.DType))
		}
	}
	if buffer == nil {
		if buffer, err = backend.BufferFromFlatData(0, flat, shape); err != nil {
			return nil, fmt.Errorf("moving %s to the device: %w", shape, err)
		}
	}
	t, err := tensors.FromBuffer(buffer)
	if err != nil {
		_ = buffer.Finalize()
		return nil, err
	}
	return t, nil
}

// Close frees the weights and compiled graphs.
func (m *Qwen35Model) Close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, e := range m.execs {
		if e != nil {
			e.Finalize()
			m.execs[i] = nil
		}
	}
	for _, t := range m.weights {
		if t != nil {
			_ = t.FinalizeAll()
		}
	}
	m.weights = nil
}

// WeightBytes is the size of the resident weights.
func (m *Qwen35Model) WeightBytes() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	var n int64
	for _, t := range m.weights {
		n += int64(t.Shape().ByteSize())
	}
	return n
}

// CompileStats reports the step graphs compiled so far and the time they took.
func (m *Qwen35Model) CompileStats() CompileStats {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.compile
}

// Qwen35Cache is a Qwen3.5 decoding state: keys and values [kvHeads, capacity, headDim] for
// each full-attention layer (growing with the context), and for each Gated DeltaNet layer the
// convolution state [kernel−1, convDim] and the recurrent state [valueHeads, keyDim, valueDim]
// in float32 (constant size, whatever the length).
type Qwen35Cache struct {
	model    *Qwen35Model
	states   []*tensors.Tensor // two per layer
	capacity int
	length   int
	ids      []int
	broken   bool
}

// NewCache returns an empty cache.
func (m *Qwen35Model) NewCache() (*Qwen35Cache, error) {
	c := &Qwen35Cache{model: m}
	cfg := m.Config
	for _, t := range cfg.LayerTypes {
		var a, b shapes.Shape
		if t == FullAttention {
			a = shapes.Make(m.DType.gomlx(), cfg.KVHeads, 0, cfg.HeadDim)
			b = a
		} else {
			a = shapes.Make(dtypes.Float32, cfg.ConvKernel-1, cfg.ConvDim())
			b = shapes.Make(dtypes.Float32, cfg.LinValueHeads, cfg.LinKeyDim, cfg.LinValueDim)
		}
		for _, s := range []shapes.Shape{a, b} {
			if s.Dimensions[1] == 0 && t == FullAttention {
				c.states = append(c.states, nil) // allocated by reserve
				continue
			}
			ts, err := tensors.FromShapeForBackend(m.Backend, 0, s) // zeroed
			if err != nil {
				c.Close()
				return nil, fmt.Errorf("octlm: allocating the Qwen3.5 cache: %w", err)
			}
			c.states = append(c.states, ts)
		}
	}
	return c, nil
}

// Len is the number of positions the cache holds.
func (c *Qwen35Cache) Len() int { return c.length }

// IDs are the token IDs the cache has seen, in order (the slice belongs to the cache).
func (c *Qwen35Cache) IDs() []int { return c.ids[:c.length:c.length] }

// Bytes is the cache's memory now: the attention layers' keys and values at the current
// capacity plus the DeltaNet layers' constant states.
func (c *Qwen35Cache) Bytes() int64 {
	var n int64
	for _, t := range c.states {
		if t != nil {
			n += int64(t.Shape().ByteSize())
		}
	}
	return n
}

// Close frees the cache.
func (c *Qwen35Cache) Close() {
	for _, t := range c.states {
		if t != nil {
			_ = t.FinalizeAll()
		}
	}
	c.states = nil
	c.broken = true
}

// reserve grows the attention layers' keys and values to hold n slots.
func (c *Qwen35Cache) reserve(n int) error {
	if c.broken {
		return errors.New("octlm: the Qwen3.5 cache was closed or lost in a failed step")
	}
	if n <= c.capacity {
		return nil
	}
	capacity := max(n, 2*c.capacity, minCacheCapacity)
	cfg := c.model.Config
	shape := shapes.Make(c.model.DType.gomlx(), cfg.KVHeads, capacity, cfg.HeadDim)
	grown := make(map[int]*tensors.Tensor)
	fail := func(err error) error {
		for _, t := range grown {
			_ = t.FinalizeAll()
		}
		return err
	}
	for i, t := range cfg.LayerTypes {
		if t != FullAttention {
			continue
		}
		for _, j := range []int{2 * i, 2*i + 1} {
			ts, err := tensors.FromShapeForBackend(c.model.Backend, 0, shape)
			if err != nil {
				return fail(fmt.Errorf("octlm: allocating a KV cache of %d positions: %w", capacity, err))
			}
			grown[j] = ts
			if c.length > 0 {
				if err := copyCacheRows(ts, c.states[j], c.capacity, capacity, c.length); err != nil {
					return fail(err)
				}
			}
		}
	}
	for j, t := range grown {
		if c.states[j] != nil {
			_ = c.states[j].FinalizeAll()
		}
		c.states[j] = t
	}
	c.capacity = capacity
	return nil
}

// Forward is the full path: the whole prompt, logits for every position.
func (m *Qwen35Model) Forward(ids []int) (Logits, error) {
	cache, err := m.NewCache()
	if err != nil {
		return Logits{}, err
	}
	defer cache.Close()
	return m.ForwardCached(ids, cache)
}

// ForwardCached is the cached path: ids on top of what cache holds; logits for every position.
func (m *Qwen35Model) ForwardCached(ids []int, cache *Qwen35Cache) (Logits, error) {
	rows := make([]int, len(ids))
	for i := range rows {
		rows[i] = i
	}
	l, _, err := m.run(ids, cache, rows, false)
	return l, err
}

// Next runs ids on top of cache and returns the logits of the last position.
func (m *Qwen35Model) Next(ids []int, cache *Qwen35Cache) ([]float32, error) {
	l, _, err := m.run(ids, cache, []int{len(ids) - 1}, false)
	if err != nil {
		return nil, err
	}
	return l.Data, nil
}

// Trace runs ids through the full path and returns, besides the logits, the hidden state
// [len(ids), hidden] after the embedding (index 0) and after every layer (index 1 + layer).
func (m *Qwen35Model) Trace(ids []int) (Logits, [][]float32, error) {
	cache, err := m.NewCache()
	if err != nil {
		return Logits{}, nil, err
	}
	defer cache.Close()
	rows := make([]int, len(ids))
	for i := range rows {
		rows[i] = i
	}
	return m.run(ids, cache, rows, true)
}

// Chunking of the prefill: at most q35MaxChunkRows rows per step (a power of two, so the
// DeltaNet chunks of 64 divide it), fewer while the attention scores of a step would exceed
// attentionBudget. Variables so that tests can force small chunks.
var q35MaxChunkRows, q35MinChunkRows = 256, 16

func (m *Qwen35Model) chunkRows(start int) int {
	rows := q35MaxChunkRows
	for rows > q35MinChunkRows && m.Config.Heads*rows*(start+rows) > attentionBudget {
		rows /= 2
	}
	return rows
}

// q35Bucket rounds a chunk length up to a power of two.
func q35Bucket(n int) int {
	b := 1
	for b < n {
		b *= 2
	}
	return b
}

func (m *Qwen35Model) checkIDs(ids []int, cache *Qwen35Cache) error {
	if cache == nil || cache.model != m {
		return fmt.Errorf("octlm: the cache does not belong to this model: %w", ErrBadInput)
	}
	if len(ids) == 0 {
		return fmt.Errorf("octlm: empty token sequence: %w", ErrBadInput)
	}
	for i, id := range ids {
		if id < 0 || id >= m.Config.VocabSize {
			return fmt.Errorf("octlm: token %d at position %d is outside the vocabulary [0, %d): %w",
				id, i, m.Config.VocabSize, ErrBadInput)
		}
	}
	if cache.Len()+len(ids) > m.Config.ContextLength {
		return &ContextError{Positions: cache.Len() + len(ids), ContextLength: m.Config.ContextLength}
	}
	return nil
}

// run executes ids on top of cache in chunks and returns the logits of rows (ascending), and
// with trace the hidden states of every position.
func (m *Qwen35Model) run(ids []int, cache *Qwen35Cache, rows []int, trace bool) (Logits, [][]float32, error) {
	if err := m.checkIDs(ids, cache); err != nil {
		return Logits{}, nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.weights == nil {
		return Logits{}, nil, errors.New("octlm: model is closed")
	}
	var hidden [][]float32
	if trace {
		hidden = make([][]float32, m.Config.NLayers+1)
	}
	logits := Logits{Rows: len(rows), Vocab: m.Config.VocabSize, Data: make([]float32, 0, len(rows)*m.Config.VocabSize)}
	next := 0
	for at := 0; at < len(ids); {
		n := min(m.chunkRows(cache.Len()), len(ids)-at)
		var chunkRows []int
		for next < len(rows) && rows[next] < at+n {
			chunkRows = append(chunkRows, rows[next]-at)
			next++
		}
		wanted := len(chunkRows) > 0
		if !wanted {
			chunkRows = []int{n - 1}
		}
		data, h, err := m.runChunk(ids[at:at+n], cache, chunkRows, trace)
		if err != nil {
			if at > 0 {
				cache.broken = true
				err = fmt.Errorf("%w (after %d of the %d tokens: the cache is lost)", err, at, len(ids))
			}
			return Logits{}, nil, err
		}
		if wanted {
			logits.Data = append(logits.Data, data...)
		}
		for i := range h {
			hidden[i] = append(hidden[i], h[i]...)
		}
		at += n
	}
	return logits, hidden, nil
}

// runChunk runs the step graph once for ids on top of cache.
func (m *Qwen35Model) runChunk(ids []int, cache *Qwen35Cache, rows []int, trace bool) ([]float32, [][]float32, error) {
	start := cache.Len()
	seqLen := q35Bucket(len(ids))
	if err := cache.reserve(start + seqLen); err != nil {
		return nil, nil, err
	}
	attend := min(cache.capacity, max(q35Bucket(start+len(ids)), start+seqLen))
	padded := make([]int32, seqLen)
	for i, id := range ids {
		padded[i] = int32(id)
	}
	keyPos := make([]int32, attend)
	for i := range keyPos {
		keyPos[i] = int32(i)
	}
	logitRows := make([]int32, len(rows))
	for i, r := range rows {
		logitRows[i] = int32(r)
	}
	args := make([]any, 0, numStepInputs+len(m.weights)+len(cache.states))
	args = append(args, padded, int32(start), int32(len(ids)), keyPos, logitRows)
	for _, w := range m.weights {
		args = append(args, w)
	}
	for _, t := range cache.states {
		args = append(args, t)
	}
	exec, err := m.compileFor(args, trace)
	if err != nil {
		return nil, nil, err
	}
	nStates := len(cache.states)
	for i, t := range cache.states {
		donated, err := graph.DonateTensorBuffer(t, m.Backend, 0)
		if err != nil {
			cache.broken = true
			return nil, nil, fmt.Errorf("octlm: donating the cache: %w", err)
		}
		args[len(args)-nStates+i] = donated
	}
	cache.states = nil
	outputs, err := exec.Call(args...)
	if err != nil {
		cache.broken = true
		return nil, nil, fmt.Errorf("octlm: running the Qwen3.5 step graph (%d tokens at position %d): %w", len(ids), start, err)
	}
	cache.states = outputs[1 : 1+nStates]
	cache.length = start + len(ids)
	cache.ids = append(cache.ids[:start], ids...)
	data, err := tensors.CopyFlatData[float32](outputs[0])
	_ = outputs[0].FinalizeAll()
	if err != nil {
		return nil, nil, fmt.Errorf("octlm: reading logits: %w", err)
	}
	var hidden [][]float32
	for _, t := range outputs[1+nStates:] {
		h, err := tensors.CopyFlatData[float32](t)
		_ = t.FinalizeAll()
		if err != nil {
			return nil, nil, fmt.Errorf("octlm: reading hidden states: %w", err)
		}
		hidden = append(hidden, h[:len(ids)*m.Config.Hidden])
	}
	return data, hidden, nil
}

func (m *Qwen35Model) compileFor(args []any, trace bool) (*graph.Exec, error) {
	which := 0
	if trace {
		which = 1
	}
	if m.execs[which] == nil {
		exec, err := graph.NewExec(m.Backend, func(g *graph.Graph, inputs []*graph.Node) []*graph.Node {
			return m.q35StepGraph(g, inputs, trace)
		})
		if err != nil {
			return nil, fmt.Errorf("octlm: building the Qwen3.5 step graph: %w", err)
		}
		m.execs[which] = exec.WithName("octlm_qwen35_step").SetMaxCache(-1)
		if m.compiled == nil {
			m.compiled = map[string]bool{}
		}
	}
	argShapes := make([]shapes.Shape, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case *tensors.Tensor:
			argShapes[i] = v.Shape()
		case []int32:
			argShapes[i] = shapes.Make(dtypes.Int32, len(v))
		case int32:
			argShapes[i] = shapes.Make(dtypes.Int32)
		default:
			return nil, fmt.Errorf("octlm: step argument %d has unexpected type %T", i, a)
		}
	}
	key := fmt.Sprint(which, argShapes[:numStepInputs], argShapes[numStepInputs+len(m.weights):])
	if !m.compiled[key] {
		begin := time.Now()
		if _, err := m.execs[which].Compile(argShapes...); err != nil {
			return nil, fmt.Errorf("octlm: compiling the Qwen3.5 step graph for %v: %w", key, err)
		}
		m.compiled[key] = true
		m.compile.Graphs++
		m.compile.Time += time.Since(begin)
	}
	return m.execs[which], nil
}
