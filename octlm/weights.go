package octlm

import (
	"errors"
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

	"github.com/octlm/octlm/internal/hostproduct"
	"github.com/octlm/octlm/loader"
)

// residentDType is the weight's dtype on the engine in a model of dtype.
func (s weightSpec) residentDType(dtype DType) dtypes.DType {
	if s.Float32 {
		return dtypes.Float32
	}
	return dtype.gomlx()
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
	// Layout, when set, replaces LayoutFor(the backend's engine): tests and benchmarks compare
	// layouts with it.
	Layout *Layout
	// Chunks bound the prefill's chunk rows; zero fields take the defaults.
	Chunks ChunkOptions
	// Adapter, when set, is a LoRA applied unmerged in every step graph; its modules must be
	// Linear weights of the model, of their sizes. The model keeps it (do not change it after).
	Adapter *LoRA
}

// Load reads a Hugging Face checkpoint folder (config.json and model.safetensors, or a sharded
// index) of a registered architecture (config.json's model_type: "qwen3") into a model.
func Load(dir string, opts LoadOptions) (*Model, error) {
	arch, err := readArchitecture(filepath.Join(dir, "config.json"))
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
	return load(arch, ckpt, opts)
}

// LoadQwen3Checkpoint builds a Qwen3 model for cfg with no weights, then streams every tensor of
// ckpt into resident backend buffers, one tensor at a time, with one copy each. Unexpected,
// missing and mis-shaped tensors (an untied head's lm_head.weight included), and a stored tied
// head that differs from the embedding, are errors naming the tensor; on any error nothing
// stays allocated.
func LoadQwen3Checkpoint(cfg Config, ckpt *loader.Checkpoint, opts LoadOptions) (*Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return load(qwen3{cfg}, ckpt, opts)
}

// load is LoadQwen3Checkpoint for any architecture: the weight table says which tensors to read,
// under which names, and how to lay each out.
func load(arch architecture, ckpt *loader.Checkpoint, opts LoadOptions) (m *Model, err error) {
	if opts.Backend == nil {
		return nil, fmt.Errorf("octlm: load: no backend given")
	}
	if err := checkArchSizes(arch, ckpt); err != nil {
		return nil, err
	}
	dtype := opts.DType
	if dtype == "" {
		dtype = Float32
	}
	layout := layoutOf(opts.Backend)
	if opts.Layout != nil {
		layout = *opts.Layout
	}
	if !opts.Backend.HasSharedBuffers() {
		layout.HostEmbed = false // reading the table on the host would copy it there
		layout.PieceMACs = 0     // pieces are filled in place (fillPieces)
	}
	layout.HostRows, layout.HostAttention, layout.HostGated, layout.HostNorm = 0, false, false, false
	if hb, ok := opts.Backend.(*hostproduct.Backend); ok {
		layout.HostGated, layout.HostNorm = true, true
		if layout.PiecePanels > 0 {
			layout.HostRows = hb.Options().MaxRows
		}
		if hb.Options().Attention && layout.KeysTransposed {
			layout.HostAttention, layout.CacheLeft = true, false
		}
	}
	if layout.HalfLinearRows && dtype != Float32 {
		layout.LinearRows = true
	}
	specs := residentSpecs(arch.weights(), layout, dtype)
	if opts.Adapter != nil {
		if err := opts.Adapter.check(arch.weights()); err != nil {
			return nil, err
		}
	}
	// Where each checkpoint tensor goes: resident weight i, as a whole (part -1) or as part j.
	type place struct{ i, part int }
	index := make(map[string]place, len(specs))
	for i, s := range specs {
		if s.Of != "" {
			if s.First == 0 { // the first piece; the others follow it
				index[s.Of] = place{i, -1}
				if s.Copy != "" {
					index[s.Copy] = place{i, -1}
				}
			}
			continue
		}
		index[s.Name] = place{i, -1}
		if s.Copy != "" {
			index[s.Copy] = place{i, -1}
		}
		for j, part := range s.Parts {
			delete(index, s.Name) // a fused weight has no checkpoint name of its own
			index[part.Name] = place{i, j}
		}
	}
	m = &Model{shape: arch.shape(), DType: dtype, Backend: opts.Backend, arch: arch, layout: layout, specs: specs, adapter: opts.Adapter,
		chunks: opts.Chunks.withDefaults(), weights: make([]*tensors.Tensor, len(specs))}
	embedding, _ := arch.sizeNames()
	m.embedding = slices.IndexFunc(specs, func(s weightSpec) bool { return s.Name == embedding[0] || s.Of == embedding[0] })
	if m.embedding < 0 {
		m.layout.HostEmbed = false // no table of that name to read (the graph looks it up)
	}
	fusing := map[int]*fusedFill{} // fused weights with parts still to come
	partial := m                   // error returns set m to nil; partial is what to free
	defer func() {
		if err != nil {
			partial.Close()
			for _, f := range fusing {
				f.abandon()
			}
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
		at, ok := index[name]
		if !ok {
			if arch.skip(name) {
				done += e.Info.Size
				continue
			}
			return nil, fmt.Errorf("octlm: %s: unexpected checkpoint tensor", where)
		}
		i := at.i
		spec, pieces := specs[i], 0
		if at.part >= 0 {
			spec = spec.Parts[at.part]
		}
		if spec.Of != "" {
			spec, pieces = wholeOf(specs, i)
		}
		if !slices.Equal(e.Info.Shape, spec.Shape) {
			return nil, fmt.Errorf("octlm: %s: shape %v does not match the config's %v", where, e.Info.Shape, spec.Shape)
		}
		switch {
		case at.part >= 0:
			f := fusing[i]
			if f == nil && m.weights[i] == nil {
				if f, err = newFusedFill(opts.Backend, specs[i], layout, dtype); err != nil {
					return nil, fmt.Errorf("octlm: %s: %w", where, err)
				}
				fusing[i] = f
			}
			if f == nil || f.filled[at.part] {
				return nil, fmt.Errorf("octlm: %s: stored twice", where)
			}
			if m.weights[i], err = f.fill(at.part, e, &scratch); err != nil {
				return nil, fmt.Errorf("octlm: %s: %w", where, err)
			}
			if m.weights[i] != nil {
				delete(fusing, i)
			}
		case m.weights[i] != nil:
			if spec.Copy == "" {
				return nil, fmt.Errorf("octlm: %s: stored twice", where)
			}
			// Either of the two copies filled the weight; the other must equal it.
			if err := checkTiedCopy(from[i], e, m.weights[i:i+max(pieces, 1)], spec, layout, &scratch); err != nil {
				return nil, fmt.Errorf("octlm: %s: checkpoint tied weights differ: %w", where, err)
			}
		case pieces > 0:
			if err := fillPieces(opts.Backend, specs[i:i+pieces], layout, e, dtype, m.weights[i:i+pieces], &scratch); err != nil {
				return nil, fmt.Errorf("octlm: %s: %w", where, err)
			}
			from[i] = e
		default:
			t, err := residentTensor(opts.Backend, spec, layout, e, dtype, &scratch)
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
		if t != nil {
			continue
		}
		missing := specs[i].Name
		if specs[i].Of != "" {
			missing = specs[i].Of
		}
		for j, part := range specs[i].Parts {
			if f := fusing[i]; f == nil || !f.filled[j] {
				missing = part.Name
				break
			}
		}
		return nil, fmt.Errorf("octlm: %s: missing checkpoint tensor %q", ckpt.Dir(), missing)
	}
	return m, nil
}

// wholeOf is the checkpoint Linear weight whose first piece is specs[i] (Layout.PieceMACs),
// and how many pieces it is in (specs[i:i+pieces]).
func wholeOf(specs []weightSpec, i int) (whole weightSpec, pieces int) {
	whole = specs[i]
	whole.Name, whole.Of, whole.First = specs[i].Of, "", 0
	whole.Shape = []int{0, specs[i].Shape[1]}
	for j := i; j < len(specs) && specs[j].Of == specs[i].Of; j++ {
		whole.Shape[0] += specs[j].Shape[0]
		pieces++
	}
	return whole, pieces
}

// fillPieces reads the rows of e, a checkpoint weight [out, in] (a Linear weight or a table),
// into new resident pieces laid out as layout says, one per spec (their First and Shape say
// which rows), set in dst: each piece's rows are decoded into its buffer (through scratch, one
// piece's worth, where they are converted or transposed), so that no whole-weight copy is ever
// held. On error none stays allocated.
func fillPieces(backend compute.Backend, specs []weightSpec, layout Layout, e loader.Entry, dtype DType, dst []*tensors.Tensor, scratch *[]float32) (err error) {
	defer func() {
		if err != nil {
			for k, t := range dst {
				if t != nil {
					t.FinalizeAll()
					dst[k] = nil
				}
			}
		}
	}()
	for k, s := range specs {
		shape := shapes.Make(s.residentDType(dtype), s.residentShape(layout)...)
		buffer, flat, err := backend.NewSharedBuffer(0, shape)
		if err != nil {
			return fmt.Errorf("allocating piece %d %s: %w", k, shape, err)
		}
		layout.adviseHugePages(flat)
		if dst[k], err = tensors.FromBuffer(buffer); err != nil {
			_ = buffer.Finalize()
			return err
		}
		switch {
		case s.panels(layout):
			err = fillPanelPiece(flat, s, layout.PiecePanels, e, scratch)
		case s.Kind == linearWeight && !layout.LinearRows: // columns [in, n]: one panel as wide as the piece
			err = fillPanelPiece(flat, s, s.Shape[0], e, scratch)
		default:
			err = fillRowPiece(flat, s, e, scratch)
		}
		if err != nil {
			return fmt.Errorf("piece %d (rows %d…%d): %w", k, s.First, s.First+s.Shape[0]-1, err)
		}
	}
	return e.File.Release(e.Info)
}

// fillRowPiece decodes the rows of e that piece s holds into flat as they are stored, [n, in].
func fillRowPiece(flat any, s weightSpec, e loader.Entry, scratch *[]float32) error {
	first := s.First * s.Shape[1]
	switch to := flat.(type) {
	case []float32:
		return e.File.ReadFloat32Range(e.Info, first, to)
	case []bfloat16.BFloat16:
		return readConverted(e, first, to, scratch, bfloat16.FromFloat32)
	case []float16.Float16:
		return readConverted(e, first, to, scratch, float16.FromFloat32)
	}
	return fmt.Errorf("unsupported resident type %T", flat)
}

// fillPanelPiece decodes the rows of e that piece s holds ([n, in]) through scratch into flat
// as panels of width columns, [n/width, in, width]: panel q holds rows q·width… as columns
// (panelIndex). With width n that is the piece as columns, [in, n].
func fillPanelPiece(flat any, s weightSpec, width int, e loader.Entry, scratch *[]float32) error {
	n, in := s.Shape[0], s.Shape[1]
	values := scratchFloats(scratch, n*in)
	if err := e.File.ReadFloat32Range(e.Info, s.First*in, values); err != nil {
		return err
	}
	// Row j of the piece, element i, goes to panel j/width, row i, column j%width. Each tile of
	// rows j0..j1-1 is cut where a panel ends.
	panels := func(place func(dst, src, rows, cols int)) {
		parallelTiles(in, n, func(i0, i1, j0, j1 int) {
			for j := j0; j < j1; {
				q := j / width
				end := min(j1, (q+1)*width)
				place(panelIndex(j, i0, in, width), j*in+i0, end-j, i1-i0)
				j = end
			}
		})
	}
	switch to := flat.(type) {
	case []float32:
		panels(func(dst, src, rows, cols int) { transpose32(to[dst:], width, values[src:], in, rows, cols) })
	case []bfloat16.BFloat16:
		panels(func(dst, src, rows, cols int) {
			transposeConverted(to[dst:], width, values[src:], in, rows, cols, bfloat16.FromFloat32)
		})
	case []float16.Float16:
		panels(func(dst, src, rows, cols int) {
			transposeConverted(to[dst:], width, values[src:], in, rows, cols, float16.FromFloat32)
		})
	default:
		return fmt.Errorf("unsupported resident type %T", flat)
	}
	return nil
}

// transposeConverted writes the rows × cols block src (row stride srcStride) into dst as cols ×
// rows (row stride dstStride), converted.
func transposeConverted[T any](dst []T, dstStride int, src []float32, srcStride, rows, cols int, convert func(float32) T) {
	for r := range rows {
		for c := range cols {
			dst[c*dstStride+r] = convert(src[r*srcStride+c])
		}
	}
}

// readConverted decodes len(dst) elements of e from element first on through scratch and
// rounds them into dst (a bfloat16 value comes back as itself).
func readConverted[T any](e loader.Entry, first int, dst []T, scratch *[]float32, convert func(float32) T) error {
	values := scratchFloats(scratch, len(dst))
	if err := e.File.ReadFloat32Range(e.Info, first, values); err != nil {
		return err
	}
	convertAll(dst, values, convert)
	return nil
}

// fusedFill is a fused resident weight ([in, Σ out], or [Σ out, in] with Layout.LinearRows) while its parts arrive: in a shared backend
// buffer, or in host memory uploaded once the last part is in.
type fusedFill struct {
	backend compute.Backend
	spec    weightSpec
	layout  Layout
	shape   shapes.Shape
	buffer  compute.Buffer // shared with the host, or nil
	flat    any
	filled  []bool
}

func newFusedFill(backend compute.Backend, spec weightSpec, layout Layout, dtype DType) (*fusedFill, error) {
	f := &fusedFill{backend: backend, spec: spec, layout: layout, filled: make([]bool, len(spec.Parts)),
		shape: shapes.Make(spec.residentDType(dtype), spec.residentShape(layout)...)}
	var err error
	if backend.HasSharedBuffers() {
		if f.buffer, f.flat, err = backend.NewSharedBuffer(0, f.shape); err != nil {
			return nil, fmt.Errorf("allocating %s: %w", f.shape, err)
		}
		layout.adviseHugePages(f.flat)
	} else {
		f.flat = dtypes.MakeAnySlice(f.shape.DType, f.shape.Size())
	}
	return f, nil
}

// fill decodes part j from e into its columns; once every part is in, it returns the resident
// weight (and f is done with).
func (f *fusedFill) fill(j int, e loader.Entry, scratch *[]float32) (*tensors.Tensor, error) {
	offset := 0
	for _, part := range f.spec.Parts[:j] {
		offset += part.Shape[0]
	}
	if err := fillLinear(f.flat, f.spec.Parts[j], f.layout, e, f.spec.Shape[0], offset, scratch); err != nil {
		f.abandon()
		return nil, err
	}
	f.filled[j] = true
	if slices.Contains(f.filled, false) {
		return nil, nil
	}
	buffer := f.buffer
	if buffer == nil {
		var err error
		if buffer, err = f.backend.BufferFromFlatData(0, f.flat, f.shape); err != nil {
			return nil, fmt.Errorf("moving %s to the device: %w", f.shape, err)
		}
	}
	f.buffer, f.flat = nil, nil
	t, err := tensors.FromBuffer(buffer)
	if err != nil {
		_ = buffer.Finalize()
		return nil, err
	}
	return t, nil
}

// abandon frees what f holds.
func (f *fusedFill) abandon() {
	if f.buffer != nil {
		_ = f.buffer.Finalize()
	}
	f.buffer, f.flat = nil, nil
}

// residentTensor reads a checkpoint tensor into a new backend buffer laid out as spec says.
// Where the backend shares memory with the host (the pure-Go backend) the bytes are decoded
// straight into the buffer; an embedding in the model's dtype needs no other copy, a Linear
// weight passes through scratch (one weight's worth) to be transposed. Elsewhere the host
// copy is uploaded and dropped.
func residentTensor(backend compute.Backend, spec weightSpec, layout Layout, e loader.Entry, dtype DType, scratch *[]float32) (*tensors.Tensor, error) {
	shape := shapes.Make(spec.residentDType(dtype), spec.residentShape(layout)...)
	var buffer compute.Buffer
	var flat any
	var err error
	if backend.HasSharedBuffers() {
		// Not zeroed: fill writes every element.
		if buffer, flat, err = backend.NewSharedBuffer(0, shape); err != nil {
			return nil, fmt.Errorf("allocating %s: %w", shape, err)
		}
		layout.adviseHugePages(flat)
	} else {
		flat = dtypes.MakeAnySlice(shape.DType, shape.Size())
	}
	if err := fill(flat, spec, layout, e, scratch); err != nil {
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
// layout spec and layout give it: as stored for vectors and tables stored as rows, transposed
// for Linear weights and tables stored as columns.
func fill(flat any, spec weightSpec, layout Layout, e loader.Entry, scratch *[]float32) error {
	if spec.Kind == tableWeight && layout.TableColumns {
		return fillColumns(flat, spec, layout, e, scratch)
	}
	n := e.Info.NumElements()
	if spec.Kind == tableWeight && layout.tableBlocks() > 1 {
		// Rows in blocks: the last block's padding rows zeroed, then the rows as stored, as a
		// vector is filled below.
		switch dst := flat.(type) {
		case []float32:
			flat = zeroAfter(dst, n)
		case []bfloat16.BFloat16:
			flat = zeroAfter(dst, n)
		case []float16.Float16:
			flat = zeroAfter(dst, n)
		default:
			return fmt.Errorf("unsupported resident type %T", flat)
		}
	}
	if spec.Kind != linearWeight {
		switch dst := flat.(type) {
		case []float32:
			return e.File.ReadFloat32(e.Info, dst)
		case []bfloat16.BFloat16:
			if e.Info.DType == loader.BF16 { // same bits: no conversion, no scratch
				return readBFloat16Bits(e, dst)
			}
		}
	}
	if spec.Kind == linearWeight {
		return fillLinear(flat, spec, layout, e, spec.Shape[0], 0, scratch)
	}
	values, err := readScratch(e, n, scratch)
	if err != nil {
		return err
	}
	switch dst := flat.(type) {
	case []float32:
		copy(dst, values)
	case []bfloat16.BFloat16:
		convertAll(dst, values, bfloat16.FromFloat32)
	case []float16.Float16:
		convertAll(dst, values, float16.FromFloat32)
	default:
		return fmt.Errorf("unsupported resident type %T", flat)
	}
	return nil
}

// readBFloat16Bits reads a bfloat16 checkpoint tensor into dst bit for bit: no conversion, no
// scratch.
func readBFloat16Bits(e loader.Entry, dst []bfloat16.BFloat16) error {
	return e.File.ReadBFloat16(e.Info, unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(dst))), len(dst)))
}

// zeroAfter zeroes dst from element n on and returns its first n elements.
func zeroAfter[T any](dst []T, n int) []T {
	clear(dst[n:])
	return dst[:n]
}

// readScratch decodes the n elements of e into scratch as float32.
func readScratch(e loader.Entry, n int, scratch *[]float32) ([]float32, error) {
	values := scratchFloats(scratch, n)
	return values, e.File.ReadFloat32(e.Info, values)
}

// scratchFloats is the first n floats of *scratch, grown (and kept for the next weight) when it
// holds fewer.
func scratchFloats(scratch *[]float32, n int) []float32 {
	if cap(*scratch) < n {
		*scratch = make([]float32, n)
	}
	return (*scratch)[:n]
}

// fillLinear decodes the Linear weight of e ([out, in]) into flat, a resident weight of which
// it is the outputs offset..offset+out-1 of width (width = out and offset 0 unless it is a
// part of a fused one): as columns of [in, width], transposed, or with layout.LinearRows as
// rows of [width, in], as stored.
func fillLinear(flat any, spec weightSpec, layout Layout, e loader.Entry, width, offset int, scratch *[]float32) error {
	out, in := spec.Shape[0], spec.Shape[1]
	if layout.LinearRows { // straight into place, no scratch
		switch dst := flat.(type) {
		case []float32:
			return e.File.ReadFloat32(e.Info, dst[offset*in:(offset+out)*in])
		case []bfloat16.BFloat16:
			if e.Info.DType == loader.BF16 {
				rows := dst[offset*in : (offset+out)*in]
				return readBFloat16Bits(e, rows)
			}
		}
	}
	values, err := readScratch(e, out*in, scratch)
	if err != nil {
		return err
	}
	if layout.LinearRows {
		switch dst := flat.(type) {
		case []bfloat16.BFloat16:
			convertAll(dst[offset*in:(offset+out)*in], values, bfloat16.FromFloat32)
		case []float16.Float16:
			convertAll(dst[offset*in:(offset+out)*in], values, float16.FromFloat32)
		default:
			return fmt.Errorf("unsupported resident type %T", flat)
		}
		return nil
	}
	switch dst := flat.(type) {
	case []float32:
		parallelTiles(in, out, func(i0, i1, j0, j1 int) {
			transpose32(dst[i0*width+offset+j0:], width, values[j0*in+i0:], in, j1-j0, i1-i0)
		})
	case []bfloat16.BFloat16:
		placeTransposed(dst, values, out, in, width, offset, bfloat16.FromFloat32)
	case []float16.Float16:
		placeTransposed(dst, values, out, in, width, offset, float16.FromFloat32)
	default:
		return fmt.Errorf("unsupported resident type %T", flat)
	}
	return nil
}

// fillColumns decodes a table [vocab, d] into flat as columns, rows rows at a time: [d, vocab],
// or in blocks [blocks, d, perBlock] (Layout.TableBlocks) with the last block's padding columns
// zeroed.
func fillColumns(flat any, spec weightSpec, layout Layout, e loader.Entry, scratch *[]float32) error {
	vocab, d := spec.Shape[0], spec.Shape[1]
	rowsAtATime := layout.columnRows()
	perBlock := ceilDiv(vocab, layout.tableBlocks())
	buf := scratchFloats(scratch, rowsAtATime*d)
	for r0 := 0; r0 < vocab; r0 += rowsAtATime {
		rows := min(rowsAtATime, vocab-r0)
		values := buf[:rows*d]
		if err := e.File.ReadFloat32Range(e.Info, r0*d, values); err != nil {
			return err
		}
		// Tokens t0..t1-1 of one block are columns c0.. of that block's [d, perBlock] matrix.
		for t0 := r0; t0 < r0+rows; {
			block, c0 := layout.tableColumn(t0, vocab)
			t1 := min(r0+rows, (block+1)*perBlock)
			if err := placeColumnRun(flat, values[(t0-r0)*d:(t1-r0)*d], d, block*d*perBlock+c0, perBlock, t1-t0); err != nil {
				return err
			}
			t0 = t1
		}
	}
	if pad := layout.tableBlocks()*perBlock - vocab; pad > 0 && layout.tableBlocks() > 1 {
		last := (layout.tableBlocks() - 1) * d * perBlock
		for j := range d {
			at := last + j*perBlock + perBlock - pad
			switch dst := flat.(type) {
			case []float32:
				clear(dst[at : at+pad])
			case []bfloat16.BFloat16:
				clear(dst[at : at+pad])
			case []float16.Float16:
				clear(dst[at : at+pad])
			}
		}
	}
	return nil
}

// placeColumnRun writes rows table rows (values, [rows, d]) as columns into flat, starting at
// element base, with stride between one feature's columns.
func placeColumnRun(flat any, values []float32, d, base, stride, rows int) error {
	switch dst := flat.(type) {
	case []float32:
		parallelTiles(rows, d, func(i0, i1, j0, j1 int) {
			transpose32(dst[base+j0*stride+i0:], stride, values[i0*d+j0:], d, i1-i0, j1-j0)
		})
	case []bfloat16.BFloat16:
		placeColumns(dst[base:], values, stride, d, rows, bfloat16.FromFloat32)
	case []float16.Float16:
		placeColumns(dst[base:], values, stride, d, rows, float16.FromFloat32)
	default:
		return fmt.Errorf("unsupported resident type %T", flat)
	}
	return nil
}

// placeColumns writes rows table rows, values [rows, d], into dst as columns with stride
// between one feature's columns, converting as it goes.
func placeColumns[T any](dst []T, values []float32, stride, d, rows int, convert func(float32) T) {
	parallelTiles(rows, d, func(i0, i1, j0, j1 int) {
		for j := j0; j < j1; j++ {
			col := dst[j*stride:]
			for i := i0; i < i1; i++ {
				col[i] = convert(values[i*d+j])
			}
		}
	})
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

// placeTransposed writes values, a Linear weight [out, in], into dst transposed, as columns
// offset..offset+out-1 of [in, width], converting as it goes.
func placeTransposed[T any](dst []T, values []float32, out, in, width, offset int, convert func(float32) T) {
	parallelTiles(in, out, func(i0, i1, j0, j1 int) {
		transposeConverted(dst[i0*width+offset+j0:], width, values[j0*in+i0:], in, j1-j0, i1-i0, convert)
	})
}

// convertAll writes values into dst, converted.
func convertAll[T any](dst []T, values []float32, convert func(float32) T) {
	for j, v := range values {
		dst[j] = convert(v)
	}
}

// parallelTiles calls tile for every 64×64 tile of a [rows, cols] matrix, spread over
// GOMAXPROCS goroutines: tile(i0, i1, j0, j1) covers rows [i0, i1) and columns [j0, j1).
func parallelTiles(rows, cols int, tile func(i0, i1, j0, j1 int)) {
	const size = 64
	rowTiles, colTiles := ceilDiv(rows, size), ceilDiv(cols, size)
	parallelEach(rowTiles*colTiles, func(k int) {
		i0, j0 := (k/colTiles)*size, (k%colTiles)*size
		tile(i0, min(i0+size, rows), j0, min(j0+size, cols))
	})
}

// parallelEach calls f(0) … f(count−1) spread over GOMAXPROCS goroutines, the caller's one of
// them, each taking the next index in turn.
func parallelEach(count int, f func(i int)) {
	var next atomic.Int64
	work := func() {
		for {
			k := int(next.Add(1) - 1)
			if k >= count {
				return
			}
			f(k)
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
// resident weight (whole, or its pieces of rows in order) was filled from (first): byte for
// byte when both are stored alike, else value by value after decoding e, which needs a float32
// copy of it.
func checkTiedCopy(first, e loader.Entry, resident []*tensors.Tensor, spec weightSpec, layout Layout, scratch *[]float32) error {
	same, err := loader.SameData(first, e)
	if err != nil || same {
		return err
	}
	values, err := readScratch(e, e.Info.NumElements(), scratch)
	if err != nil {
		return err
	}
	// As rows the table is in the checkpoint's layout; as columns checkpoint element (t, i) is
	// resident element (i, t).
	at := func(j int) int { return j }
	if spec.Kind == tableWeight && layout.TableColumns {
		vocab, d := spec.Shape[0], spec.Shape[1]
		perBlock := ceilDiv(vocab, layout.tableBlocks())
		at = func(j int) int {
			block, column := layout.tableColumn(j/d, vocab)
			return (block*d+j%d)*perBlock + column
		}
	}
	// In pieces of rows (consecutive, in order) checkpoint element j lies in the piece that
	// holds its row; in a piece of panels, in the column of its row's panel.
	var mismatch error
	offset := 0
	for _, piece := range resident {
		size := piece.Shape().Size()
		local := func(j int) int { return at(j) - offset }
		if dims := piece.Shape().Dimensions; len(resident) > 1 && len(dims) == 3 { // a piece of panels [n/w, d, w]
			d, w := dims[1], dims[2]
			local = func(j int) int { return panelIndex((j-offset)/d, (j-offset)%d, d, w) }
		}
		err = piece.ConstFlatData(func(flat any) {
			for j, v := range values[offset : offset+size] {
				j += offset
				var got float32
				switch f := flat.(type) {
				case []float32:
					got = f[local(j)]
				case []float16.Float16:
					got, v = f[local(j)].Float32(), float16.FromFloat32(v).Float32()
				case []bfloat16.BFloat16:
					got, v = f[local(j)].Float32(), bfloat16.FromFloat32(v).Float32()
				}
				if got != v {
					mismatch = fmt.Errorf("first difference at element %d: %g vs %g", j, got, v)
					return
				}
			}
		})
		if err != nil || mismatch != nil {
			return errors.Join(err, mismatch)
		}
		offset += size
	}
	return nil
}
