package octlm

import (
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/dtypes/bfloat16"
	"github.com/gomlx/compute/dtypes/float16"
	"github.com/gomlx/compute/shapes"
	"github.com/gomlx/gomlx/core/tensors"

	"github.com/octlm/octlm/loader"
)

// Checkpoint names of the embedding and the output head. With a tied head (Config.UntiedHead
// off) the head is the embedding: Qwen3 checkpoints still store a copy under TiedHeadName,
// accepted only if it equals model.embed_tokens.weight. With an untied head it is the head's
// own weight, required.
const (
	TiedHeadName  = "lm_head.weight"
	EmbeddingName = "model.embed_tokens.weight"
)

// weightKind says how a checkpoint tensor is laid out on the backend.
type weightKind int

const (
	vectorWeight     weightKind = iota // norms: as stored
	columnWeight                       // Linear split by outputs: Hub [out, in] -> [blocks, in, out/blocks]
	rowWeight                          // Linear split by inputs: Hub [out, in] -> [blocks, in/blocks, out]
	embeddingWeight                    // Hub [vocab, d] -> [blocks, rows, d], rows·blocks ≥ vocab (embedding, untied head)
	embeddingColumns                   // Hub [vocab, d] -> [d, vocab] (the output head: tied embedding or untied head)
)

// weightSpec maps one Hugging Face tensor to one resident weight.
type weightSpec struct {
	Name     string // Hub name
	HubShape []int  // shape in the checkpoint: Linear weights are [out, in]
	Kind     weightKind
	Blocks   int // see layout
	// BlockUnit is what a Linear weight's blocks must divide: kv heads for attention (so a
	// block holds whole groups of query heads with their key/value heads), the MLP width.
	BlockUnit int
}

// residentShape is the shape the weight has on the backend.
func (s weightSpec) residentShape() []int {
	switch s.Kind {
	case columnWeight:
		out, in := s.HubShape[0], s.HubShape[1]
		return []int{s.Blocks, in, out / s.Blocks}
	case rowWeight:
		out, in := s.HubShape[0], s.HubShape[1]
		return []int{s.Blocks, in / s.Blocks, out}
	case embeddingWeight:
		vocab, d := s.HubShape[0], s.HubShape[1]
		return []int{s.Blocks, ceilDiv(vocab, s.Blocks), d}
	case embeddingColumns:
		return []int{s.HubShape[1], s.HubShape[0]}
	}
	return s.HubShape
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// layout is how weights are laid out for a backend: the layout its matmul kernels like. The
// graph reads any layout; only speed differs.
type layout struct {
	// linearBlocks cuts the Linear weights into this many blocks (at most; fewer where the
	// heads or the MLP width do not divide), as tensor parallelism splits a layer over devices:
	// q_proj, k_proj, v_proj, gate_proj and up_proj by output columns, [blocks, in, out/blocks],
	// o_proj and down_proj by input rows, [blocks, in/blocks, out], so each block of the
	// attention heads or of the MLP's hidden units runs from its input to its share of the
	// output with no reshuffle in between. GoMLX's pure-Go backend runs a matmul below about 4M
	// multiply-adds (every single-row decode product) on one core unless it has a batch axis,
	// which it spreads over the cores; the blocks are that batch axis.
	linearBlocks int
	// headRows is the most embedding rows per block (0: one block), or headColumns. The
	// embedding doubles as the output head (tied weights); an untied head (lm_head.weight) is
	// laid out the same way. Stored [blocks, rows, d] the head contracts it on its last axis
	// (hidden · headᵀ); stored as columns [d, vocab] the head is a plain product and the
	// embedding lookup gathers columns.
	headRows int

	// embedSlices looks each token's embedding row up with a slice of its own instead of one
	// gather (see embed in graph.go).
	embedSlices bool
}

// headColumns as layout.headRows stores the embedding transposed, [d, vocab].
const headColumns = -1

// The names (String) of GoMLX's pure-Go and ONNX Runtime backends.
const (
	goBackendName   = "go"
	onnxBackendName = "onnxruntime"
)

// layoutFor picks the layout for a backend: the pure-Go backend's below, plain [in, out] and
// one embedding block elsewhere (XLA parallelises a matmul by itself).
func layoutFor(backend compute.Backend) layout {
	switch backend.String() {
	case goBackendName:
		return layout{linearBlocks: goLinearBlocks, headRows: goHeadRows}
	case onnxBackendName:
		// Measured on a full-size Qwen3-0.6B: decode 5.6 -> 7.7 tokens/s and peak RSS 2.36 ->
		// 1.21x the weights against one gather per step.
		return layout{linearBlocks: 1, embedSlices: true}
	}
	return layout{linearBlocks: 1}
}

// The pure-Go layout, chosen by BenchmarkMatVec, BenchmarkHeadMatVec and BenchmarkLinearLayouts
// (compute v0.1.14, AMD Zen 5 with AVX-512): plain [in, out] Linear weights and the embedding
// as columns [d, vocab], so that every decode product is a plain row × matrix product that the
// backend's packing kernel splits over the cores (see padRows in graph.go). Measured side by
// side, one row times a [1024, 3072] float32 weight: plain 12 GB/s (padded to 4 rows), nn.Linear's
// [out, in] 8, four [in, out/4] blocks 1.3 (each block on the single-row "small" kernel);
// the head (1024 → 151936): columns 13 GB/s, rows in blocks of 2048 7.5; bfloat16 7.1 and 2.0.
var (
	goLinearBlocks = 1
	goHeadRows     = headColumns
)

// blocksFor is the number of blocks to split n columns into: the most up to want that divides n.
func blocksFor(n, want int) int {
	for b := max(want, 1); b > 1; b-- {
		if n%b == 0 {
			return b
		}
	}
	return 1
}

// lay sets the blocks of every weight of specs as l says. The embedding and an untied head
// (lm_head.weight) both take headRows: stored alike, either is the head's operand, and as
// columns both load through the same bounded scratch (see fillColumns).
func (l layout) lay(specs []weightSpec) []weightSpec {
	out := slices.Clone(specs)
	for i, s := range out {
		switch s.Kind {
		case columnWeight, rowWeight:
			out[i].Blocks = blocksFor(s.BlockUnit, l.linearBlocks)
		case embeddingWeight:
			if l.headRows == headColumns {
				out[i].Kind = embeddingColumns
			} else if l.headRows > 0 {
				out[i].Blocks = ceilDiv(s.HubShape[0], l.headRows)
			}
		}
	}
	return out
}

// weightSpecs lists the model's weights in the order the graph takes them, unblocked.
func weightSpecs(c Config) []weightSpec {
	d, hd, ff := c.DModel, c.HeadWidth(), c.FFWidth()
	linear := func(name string, kind weightKind, out, in, unit int) weightSpec {
		return weightSpec{Name: name, HubShape: []int{out, in}, Kind: kind, Blocks: 1, BlockUnit: unit}
	}
	vector := func(name string, n int) weightSpec { return weightSpec{Name: name, HubShape: []int{n}} }
	specs := []weightSpec{
		{Name: EmbeddingName, HubShape: []int{c.VocabSize, d}, Kind: embeddingWeight, Blocks: 1},
		vector("model.norm.weight", d),
	}
	for i := range c.NLayers {
		p := fmt.Sprintf("model.layers.%d.", i)
		specs = append(specs,
			vector(p+"input_layernorm.weight", d),
			linear(p+"self_attn.q_proj.weight", columnWeight, c.NHeads*hd, d, c.KVHeads),
			linear(p+"self_attn.k_proj.weight", columnWeight, c.KVHeads*hd, d, c.KVHeads),
			linear(p+"self_attn.v_proj.weight", columnWeight, c.KVHeads*hd, d, c.KVHeads),
			linear(p+"self_attn.o_proj.weight", rowWeight, d, c.NHeads*hd, c.KVHeads),
		)
		if c.QKNorm {
			specs = append(specs, vector(p+"self_attn.q_norm.weight", hd), vector(p+"self_attn.k_norm.weight", hd))
		}
		specs = append(specs,
			vector(p+"post_attention_layernorm.weight", d),
			linear(p+"mlp.gate_proj.weight", columnWeight, ff, d, ff),
			linear(p+"mlp.up_proj.weight", columnWeight, ff, d, ff),
			linear(p+"mlp.down_proj.weight", rowWeight, d, ff, ff),
		)
	}
	if c.UntiedHead {
		specs = append(specs, weightSpec{Name: TiedHeadName, HubShape: []int{c.VocabSize, d}, Kind: embeddingWeight, Blocks: 1})
	}
	return specs
}

// LoadOptions choose where and how a model is loaded.
type LoadOptions struct {
	Backend compute.Backend
	DType   DType // resident weights and activations; "" means Float32
	// Progress, when set, is called after each tensor with the bytes loaded so far and in all.
	Progress func(name string, done, total int64)
	// Warn, when set, receives what the load noticed but did not refuse (a shard file the
	// index does not list), one message per call.
	Warn func(msg string)
}

// Load reads a Hugging Face Qwen3 checkpoint folder (config.json and model.safetensors, or a
// sharded index) into a model.
func Load(dir string, opts LoadOptions) (*Model, error) {
	cfg, err := ReadQwenConfig(filepath.Join(dir, "config.json"))
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
	return LoadCheckpoint(cfg, ckpt, opts)
}

// LoadCheckpoint builds a model for cfg with no weights, then streams every tensor of ckpt into
// resident backend buffers, one tensor at a time, with one copy each. Unexpected, missing and
// mis-shaped tensors (an untied head's lm_head.weight included), and a stored tied head that
// differs from the embedding, are errors naming the tensor; on any error nothing stays
// allocated.
func LoadCheckpoint(cfg Config, ckpt *loader.Checkpoint, opts LoadOptions) (m *Model, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if opts.Backend == nil {
		return nil, fmt.Errorf("octlm: load: no backend given")
	}
	if err := checkSizes(cfg, ckpt); err != nil {
		return nil, err
	}
	dtype := opts.DType
	if dtype == "" {
		dtype = Float32
	}
	lay := layoutFor(opts.Backend)
	specs := lay.lay(weightSpecs(cfg))
	index := make(map[string]int, len(specs))
	for i, s := range specs {
		index[s.Name] = i
	}
	m = &Model{Config: cfg, DType: dtype, Backend: opts.Backend, specs: specs, embedSlices: lay.embedSlices, weights: make([]*tensors.Tensor, len(specs))}
	partial := m // error returns set m to nil; partial is what to free
	defer func() {
		if err != nil {
			partial.Close()
		}
	}()
	var total, done int64
	for e, ierr := range ckpt.Tensors() {
		if ierr != nil {
			return nil, ierr
		}
		total += e.Info.Size
	}
	from := make([]loader.Entry, len(specs)) // the checkpoint entry each weight was filled from
	var scratch []float32
	for e, ierr := range ckpt.Tensors() {
		if ierr != nil {
			return nil, ierr
		}
		name := e.Info.Name
		where := fmt.Sprintf("%s: tensor %q", e.File.Path(), name)
		if name == TiedHeadName && !cfg.UntiedHead {
			// The tied head: whichever of the two copies comes first fills the embedding; the
			// other must equal it.
			name = EmbeddingName
		}
		i, ok := index[name]
		if !ok {
			return nil, fmt.Errorf("octlm: %s: unexpected checkpoint tensor", where)
		}
		spec := specs[i]
		if !slices.Equal(e.Info.Shape, spec.HubShape) {
			return nil, fmt.Errorf("octlm: %s: shape %v does not match the config's %v", where, e.Info.Shape, spec.HubShape)
		}
		if m.weights[i] != nil {
			if name != EmbeddingName {
				return nil, fmt.Errorf("octlm: %s: stored twice", where)
			}
			if err := checkTiedCopy(from[i], e, m.weights[i], spec, &scratch); err != nil {
				return nil, fmt.Errorf("octlm: %s: checkpoint tied weights differ: %w", where, err)
			}
		} else {
			t, err := residentTensor(opts.Backend, spec, e, dtype, &scratch)
			if err != nil {
				return nil, fmt.Errorf("octlm: %s: %w", where, err)
			}
			m.weights[i], from[i] = t, e
		}
		done += e.Info.Size
		if opts.Progress != nil {
			opts.Progress(e.Info.Name, done, total)
		}
	}
	for i, t := range m.weights {
		if t == nil {
			return nil, fmt.Errorf("octlm: %s: missing checkpoint tensor %q", ckpt.Dir(), specs[i].Name)
		}
	}
	return m, nil
}

// residentTensor reads a checkpoint tensor into a new backend buffer laid out as spec says.
// Where the backend shares memory with the host (the pure-Go backend) the bytes are decoded
// straight into the buffer; an embedding in the model's dtype needs no other copy, a Linear
// weight passes through scratch (one weight's worth) to be transposed. Elsewhere the host
// copy is uploaded and dropped.
func residentTensor(backend compute.Backend, spec weightSpec, e loader.Entry, dtype DType, scratch *[]float32) (*tensors.Tensor, error) {
	shape := shapes.Make(dtype.gomlx(), spec.residentShape()...)
	var buffer compute.Buffer
	var flat any
	var err error
	if backend.HasSharedBuffers() {
		// Not zeroed: fill writes every element.
		if buffer, flat, err = backend.NewSharedBuffer(0, shape); err != nil {
			return nil, fmt.Errorf("allocating %s: %w", shape, err)
		}
	} else {
		flat = dtypes.MakeAnySlice(shape.DType, shape.Size())
	}
	if err := fill(flat, spec, e, scratch); err != nil {
		if buffer != nil {
			_ = buffer.Finalize()
		}
		return nil, err
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

// fill decodes the checkpoint tensor of e into flat, the resident weight's elements, in the
// layout spec gives it: as stored for vectors, zero rows after the vocabulary for the
// embedding's last block, blocked and transposed for Linear weights.
func fill(flat any, spec weightSpec, e loader.Entry, scratch *[]float32) error {
	if spec.Kind == embeddingColumns {
		return fillColumns(flat, spec, e, scratch)
	}
	n := e.Info.NumElements()
	if spec.Kind == vectorWeight || spec.Kind == embeddingWeight {
		switch dst := flat.(type) {
		case []float32:
			clear(dst[n:]) // padding rows of the embedding's last block
			return e.File.ReadFloat32(e.Info, dst[:n])
		case []bfloat16.BFloat16:
			if e.Info.DType == loader.BF16 { // same bits: no conversion, no scratch
				clear(dst[n:])
				return e.File.ReadBFloat16(e.Info, unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(dst))), n))
			}
		}
	}
	if cap(*scratch) < n {
		*scratch = make([]float32, n)
	}
	values := (*scratch)[:n]
	if err := e.File.ReadFloat32(e.Info, values); err != nil {
		return err
	}
	switch dst := flat.(type) {
	case []float32:
		placeFloat32(dst, values, spec)
	case []bfloat16.BFloat16:
		place(dst, values, spec, bfloat16.FromFloat32)
	case []float16.Float16:
		place(dst, values, spec, float16.FromFloat32)
	default:
		return fmt.Errorf("unsupported resident type %T", flat)
	}
	return nil
}

// columnRows is how many embedding rows fillColumns decodes at a time: 16 MiB of float32
// scratch at Qwen3-0.6B's width instead of the whole table.
var columnRows = 4096

// fillColumns decodes the embedding [vocab, d] into flat as columns [d, vocab], columnRows rows
// at a time.
func fillColumns(flat any, spec weightSpec, e loader.Entry, scratch *[]float32) error {
	vocab, d := spec.HubShape[0], spec.HubShape[1]
	if cap(*scratch) < columnRows*d {
		*scratch = make([]float32, columnRows*d)
	}
	for r0 := 0; r0 < vocab; r0 += columnRows {
		rows := min(columnRows, vocab-r0)
		values := (*scratch)[:rows*d]
		if err := e.File.ReadFloat32Range(e.Info, r0*d, values); err != nil {
			return err
		}
		switch dst := flat.(type) {
		case []float32:
			parallelTiles(1, rows, d, func(_, i0, i1, j0, j1 int) {
				transpose32(dst[j0*vocab+r0+i0:], vocab, values[i0*d+j0:], d, i1-i0, j1-j0)
			})
		case []bfloat16.BFloat16:
			placeColumns(dst, values, vocab, d, r0, rows, bfloat16.FromFloat32)
		case []float16.Float16:
			placeColumns(dst, values, vocab, d, r0, rows, float16.FromFloat32)
		default:
			return fmt.Errorf("unsupported resident type %T", flat)
		}
	}
	return nil
}

// placeColumns writes rows [r0, r0+rows) of a [vocab, d] table, values, into dst as columns
// [d, vocab], converting as it goes.
func placeColumns[T any](dst []T, values []float32, vocab, d, r0, rows int, convert func(float32) T) {
	parallelTiles(1, rows, d, func(_, i0, i1, j0, j1 int) {
		for j := j0; j < j1; j++ {
			col := dst[j*vocab+r0:]
			for i := i0; i < i1; i++ {
				col[i] = convert(values[i*d+j])
			}
		}
	})
}

// placeFloat32 writes values (Hub layout) into dst in spec's resident layout.
func placeFloat32(dst, values []float32, spec weightSpec) {
	if spec.Kind == vectorWeight || spec.Kind == embeddingWeight {
		copy(dst, values)
		clear(dst[len(values):])
		return
	}
	_, in, blocks, cols := linearGeometry(spec)
	// Block b is rows [b·cols, (b+1)·cols) of the Hub's [out, in], transposed to [in, cols].
	parallelTiles(blocks, in, cols, func(b, i0, i1, j0, j1 int) {
		transpose32(dst[b*in*cols+i0*cols+j0:], cols, values[b*cols*in+j0*in+i0:], in, j1-j0, i1-i0)
	})
}

// linearGeometry is how a Linear weight is transposed: as blocks matrices [cols, in] of the
// Hub's [out, in], each to [in, cols]. A weight split by input rows is, in memory, the plain
// transpose [in, out]: one block.
func linearGeometry(spec weightSpec) (out, in, blocks, cols int) {
	out, in = spec.HubShape[0], spec.HubShape[1]
	blocks = spec.Blocks
	if spec.Kind == rowWeight {
		blocks = 1
	}
	return out, in, blocks, out / blocks
}

// transposeScalar is transpose32 one element at a time.
func transposeScalar(dst []float32, dstStride int, src []float32, srcStride, rows, cols int) {
	for r := range rows {
		row := src[r*srcStride : r*srcStride+cols]
		for c, v := range row {
			dst[c*dstStride+r] = v
		}
	}
}

// place is placeFloat32 for the half-precision types, converting as it goes.
func place[T any](dst []T, values []float32, spec weightSpec, convert func(float32) T) {
	if spec.Kind == vectorWeight || spec.Kind == embeddingWeight {
		for j, v := range values {
			dst[j] = convert(v)
		}
		clear(dst[len(values):])
		return
	}
	_, in, blocks, cols := linearGeometry(spec)
	parallelTiles(blocks, in, cols, func(b, i0, i1, j0, j1 int) {
		src := values[b*cols*in:]
		d := dst[b*in*cols:]
		for j := j0; j < j1; j++ {
			for i := i0; i < i1; i++ {
				d[i*cols+j] = convert(src[j*in+i])
			}
		}
	})
}

// parallelTiles calls tile for every 64×64 tile of blocks matrices [rows, cols], spread over
// GOMAXPROCS goroutines: tile(b, i0, i1, j0, j1) covers rows [i0, i1) and columns [j0, j1)
// of block b.
func parallelTiles(blocks, rows, cols int, tile func(b, i0, i1, j0, j1 int)) {
	const size = 64
	rowTiles, colTiles := ceilDiv(rows, size), ceilDiv(cols, size)
	count := blocks * rowTiles * colTiles
	var next atomic.Int64
	work := func() {
		for {
			k := int(next.Add(1) - 1)
			if k >= count {
				return
			}
			b, rest := k/(rowTiles*colTiles), k%(rowTiles*colTiles)
			i0, j0 := (rest/colTiles)*size, (rest%colTiles)*size
			tile(b, i0, min(i0+size, rows), j0, min(j0+size, cols))
		}
	}
	workers := min(runtime.GOMAXPROCS(0), count)
	var wg sync.WaitGroup
	for range workers - 1 {
		wg.Go(work)
	}
	work()
	wg.Wait()
}

// checkTiedCopy checks that a second stored copy of the embedding (e) equals the one the
// resident weight was filled from (first): byte for byte when both are stored alike, else value
// by value after decoding e, which needs a float32 copy of it.
func checkTiedCopy(first, e loader.Entry, resident *tensors.Tensor, spec weightSpec, scratch *[]float32) error {
	same, err := loader.SameData(first, e)
	if err != nil || same {
		return err
	}
	n := e.Info.NumElements()
	if cap(*scratch) < n {
		*scratch = make([]float32, n)
	}
	values := (*scratch)[:n]
	if err := e.File.ReadFloat32(e.Info, values); err != nil {
		return err
	}
	// In row blocks the embedding's first vocab·d elements are in the Hub's layout; in columns
	// Hub element (t, i) is resident element (i, t).
	at := func(j int) int { return j }
	if spec.Kind == embeddingColumns {
		vocab, d := spec.HubShape[0], spec.HubShape[1]
		at = func(j int) int { return (j%d)*vocab + j/d }
	}
	var mismatch error
	err = resident.ConstFlatData(func(flat any) {
		for j, v := range values {
			var got float32
			switch f := flat.(type) {
			case []float32:
				got = f[at(j)]
			case []float16.Float16:
				got, v = f[at(j)].Float32(), float16.FromFloat32(v).Float32()
			case []bfloat16.BFloat16:
				got, v = f[at(j)].Float32(), bfloat16.FromFloat32(v).Float32()
			}
			if got != v {
				mismatch = fmt.Errorf("first difference at element %d: %g vs %g", j, got, v)
				return
			}
		}
	})
	if err != nil {
		return err
	}
	return mismatch
}
