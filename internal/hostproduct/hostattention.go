package hostproduct

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/dtypes/bfloat16"
	"github.com/gomlx/compute/dtypes/float16"
	"github.com/gomlx/compute/shapes"
)

// AttentionFunction begins the name of every graph function (compute.Builder.NewFunction) that
// this backend runs in Go as attention over a KV cache, where Options.Attention is set: the
// function's body, its definition, is never compiled then, and each call of it ends the current
// piece like a product. (Without Options.Attention the wrapped backend runs the function as any
// other, but compute v0.1.14's parallel executor can hang in a function call:
// TestComputeCallHangs; octlm calls one only where this backend runs it in Go.) Its parameters,
// in order:
//
//   - q [kvHeads, rows, hd], float32 or bfloat16: the query rows of each kv head, row r at
//     position r mod S of the chunk;
//   - k and v [kvHeads, S, hd], q's dtype or the blocks': the chunk's own keys and values;
//   - bias [S, T+S] float32: 0 where position s of the chunk attends a slot (the cache's T
//     slots, then the chunk's S positions), −Inf where it does not;
//   - the key blocks [kvHeads, hd, n] (transposed), then as many value blocks [kvHeads, n, hd],
//     float32, bfloat16 or float16 (all of one dtype, whatever q's), block i holding the cache's
//     slots from Σ n before it.
//
// Its one result, [kvHeads, rows, hd] in q's dtype, is softmax(q·Kᵀ/√hd + bias)·V per kv head,
// K and V the blocks' slots followed by k and v, accumulated in float32 (the probabilities
// rounded to q's dtype first). Slots that no row attends past the last one any row does are not
// read, but for the rest of the vector kernels' strip (up to 63 slots) in the same block.
//
// A batch of B sequences, each on its own cache, is one call of the same form with a leading
// axis of B on q, k, v, bias and the result, and the key blocks of sequence 0, 1, … B−1 (the
// same sizes for every sequence) followed by their value blocks in the same order: sequence b
// is computed as a call of its own would compute it.
const AttentionFunction = "hostproduct.attention"

// AttentionKernels reports whether this build and processor run attention's vector kernels
// (AVX-512, GOEXPERIMENT=simd on amd64). Elsewhere Options.Attention runs plain Go loops,
// which at a depth of thousands of slots would be slower than the wrapped backend's kernels
// (unmeasured: no machine here lacks AVX-512), so octlm sets it only where this is true.
func AttentionKernels() bool { return vectorKernels() }

// FourRowKernels reports whether this build and processor multiply four rows by a panel at once
// (AVX-512, GOEXPERIMENT=simd on amd64). Elsewhere a product of several rows multiplies each
// panel once a row, slower than the wrapped backend's kernels from three rows on (measured on
// AVX-512 before the four-row kernels), so octlm runs more than two rows in Go only where this
// is true.
func FourRowKernels() bool { return vectorKernels() }

// hostFunction is a function named for AttentionFunction: its parameters' shapes and its
// result's, recorded as the graph builds its body.
type hostFunction struct {
	params []shapes.Shape
	result []shapes.Shape
}

// attention is one call of a host function, run in Go: batch sequences' attention (1 for the
// form without a batch axis).
type attention struct {
	q, k, v, bias int   // slots
	keys, values  []int // the blocks' slots, sequence by sequence
	out           int
	batch         int
	kvHeads       int
	rows, seq, hd int   // a sequence's
	sizes         []int // a sequence's blocks' slots n
	slots         int   // T = Σ sizes
	outShape      shapes.Shape
}

// newHostFunction is a named function whose body goes to a builder of its own, never compiled.
func (b *builder) newHostFunction(name string) (compute.Function, error) {
	fn, err := b.backend.Backend.Builder(name).NewFunction(name)
	if err != nil {
		return nil, err
	}
	return &function{b: b, name: name, own: fn, host: &hostFunction{}}, nil
}

// isHostFunction says whether a function of this name runs in Go: a gated one always, attention
// with Options.Attention.
func (b *builder) isHostFunction(name string) bool {
	if b.uncut || b.done {
		return false
	}
	return isGated(name) || isNorm(name) || isRope(name) || (b.backend.opts.Attention && strings.HasPrefix(name, AttentionFunction))
}

// callHost records a call of host function h in main: it ends the current piece.
func (f *function) callHost(h *function, inputs []compute.Value) ([]compute.Value, error) {
	if f.own != nil || f.b.uncut || f.b.done {
		return nil, fmt.Errorf("hostproduct: %q called outside the main function's pieces", h.name)
	}
	switch {
	case isGated(h.name):
		return f.callGated(h, inputs)
	case isNorm(h.name):
		return f.callNorm(h, inputs)
	case isRope(h.name):
		return f.callRope(h, inputs)
	}
	a, err := newAttention(h.name, h.host, inputs)
	if err != nil {
		return nil, err
	}
	all, err := f.argSlots(h, inputs)
	if err != nil {
		return nil, err
	}
	blocks := a.batch * len(a.sizes)
	a.q, a.k, a.v, a.bias = all[0], all[1], all[2], all[3]
	a.keys, a.values = all[4:4+blocks], all[4+blocks:]
	a.out = f.b.newSlot()
	f.b.steps = append(f.b.steps, step{attention: a})
	return []compute.Value{&value{fn: f, shape: a.outShape, slot: a.out}}, nil
}

// argSlots is the slots of a call of host function h's arguments, values of f.
func (f *function) argSlots(h *function, inputs []compute.Value) ([]int, error) {
	slots := make([]int, len(inputs))
	for i, x := range inputs {
		v, ok := x.(*value)
		if !ok || v.fn != f {
			return nil, fmt.Errorf("hostproduct: %q called with a value of another function", h.name)
		}
		var err error
		if slots[i], err = f.b.slotOf(v); err != nil {
			return nil, err
		}
	}
	return slots, nil
}

// badCall makes the errors of a call of the host function name.
func badCall(name string) func(format string, args ...any) error {
	return func(format string, args ...any) error {
		return fmt.Errorf("hostproduct: %q: %s", name, fmt.Sprintf(format, args...))
	}
}

// argShapes is the shapes of a call's arguments, each checked against h's parameter, and the
// count of h's results checked to be results.
func (h *hostFunction) argShapes(name string, inputs []compute.Value, results int) ([]shapes.Shape, error) {
	bad := badCall(name)
	if len(h.result) != results {
		return nil, bad("%d results, want %d", len(h.result), results)
	}
	if len(inputs) != len(h.params) {
		return nil, bad("%d arguments for %d parameters", len(inputs), len(h.params))
	}
	shape := make([]shapes.Shape, len(inputs))
	for i, x := range inputs {
		v, ok := x.(*value)
		if !ok {
			return nil, bad("argument %d is %T", i, x)
		}
		if !v.shape.Equal(h.params[i]) {
			return nil, bad("argument %d is %s for a parameter %s", i, v.shape, h.params[i])
		}
		shape[i] = v.shape
	}
	return shape, nil
}

// newAttention checks a call's arguments against AttentionFunction's form and h's parameters.
func newAttention(name string, h *hostFunction, inputs []compute.Value) (*attention, error) {
	bad := badCall(name)
	shape, err := h.argShapes(name, inputs, 1)
	if err != nil {
		return nil, err
	}
	if len(shape) < 6 || len(shape)%2 != 0 {
		return nil, bad("%d parameters, want q, k, v, bias and pairs of blocks", len(shape))
	}
	q, k, v, bias := shape[0], shape[1], shape[2], shape[3]
	a := &attention{batch: 1}
	lead := 0 // 1 with a batch axis
	if q.Rank() == 4 {
		a.batch, lead = q.Dimensions[0], 1
	}
	if (q.Rank() != 3 && q.Rank() != 4) || a.batch < 1 || !floatDType(q.DType) {
		return nil, bad("q is %s, want [kvHeads, rows, hd] or [B, kvHeads, rows, hd] of float32 or bfloat16", q)
	}
	a.kvHeads, a.rows, a.hd = q.Dimensions[lead], q.Dimensions[lead+1], q.Dimensions[lead+2]
	if k.Rank() != q.Rank() || !isCacheDType(k.DType) || (lead == 1 && k.Dimensions[0] != a.batch) ||
		k.Dimensions[lead] != a.kvHeads || k.Dimensions[lead+2] != a.hd || !k.Equal(v) {
		return nil, bad("k %s and v %s, want %s[%d, S, %d] of %s or the blocks' dtype", k, v, batchDims(lead, a.batch), a.kvHeads, a.hd, q.DType)
	}
	a.seq = k.Dimensions[lead+1]
	if a.seq < 1 || a.rows%a.seq != 0 {
		return nil, bad("%d query rows for a chunk of %d", a.rows, a.seq)
	}
	if (len(shape)-4)%(2*a.batch) != 0 {
		return nil, bad("%d blocks for %d sequences: want as many key and value blocks for each", len(shape)-4, a.batch)
	}
	blocks := (len(shape) - 4) / 2 // of all the sequences
	perSeq := blocks / a.batch
	var blockDType dtypes.DType
	for i := range blocks {
		kb, vb := shape[4+i], shape[4+blocks+i]
		if i == 0 {
			blockDType = kb.DType
		}
		if kb.Rank() != 3 || vb.Rank() != 3 || kb.DType != blockDType || vb.DType != blockDType ||
			!isCacheDType(blockDType) ||
			kb.Dimensions[0] != a.kvHeads || kb.Dimensions[1] != a.hd || vb.Dimensions[0] != a.kvHeads ||
			vb.Dimensions[1] != kb.Dimensions[2] || vb.Dimensions[2] != a.hd {
			return nil, bad("block %d: keys %s and values %s, want [%d, %d, n] and [%d, n, %d] of float32, bfloat16 or float16, one dtype",
				i, kb, vb, a.kvHeads, a.hd, a.kvHeads, a.hd)
		}
		if i < perSeq {
			a.sizes = append(a.sizes, kb.Dimensions[2])
			a.slots += kb.Dimensions[2]
		} else if n := a.sizes[i%perSeq]; kb.Dimensions[2] != n {
			return nil, bad("block %d of sequence %d holds %d slots, sequence 0's %d", i%perSeq, i/perSeq, kb.Dimensions[2], n)
		}
	}
	if k.DType != q.DType && k.DType != blockDType {
		return nil, bad("k and v are %s: want q's dtype %s or the blocks' %s", k.DType, q.DType, blockDType)
	}
	if bias.DType != dtypes.Float32 || bias.Rank() != 2+lead || (lead == 1 && bias.Dimensions[0] != a.batch) ||
		bias.Dimensions[lead] != a.seq || bias.Dimensions[lead+1] != a.slots+a.seq {
		return nil, bad("bias is %s, want %s[%d, %d] of float32", bias, batchDims(lead, a.batch), a.seq, a.slots+a.seq)
	}
	a.outShape = shapes.Make(q.DType, a.kvHeads, a.rows, a.hd)
	if lead == 1 {
		a.outShape = shapes.Make(q.DType, a.batch, a.kvHeads, a.rows, a.hd)
	}
	if !h.result[0].Equal(a.outShape) {
		return nil, bad("result %s, want %s", h.result[0], a.outShape)
	}
	return a, nil
}

// isCacheDType says whether attention's cache blocks may hold dtype: float32, bfloat16, or
// float16 (a half-precision cache under float32 queries: the blocks are widened exactly as read).
func isCacheDType(dtype dtypes.DType) bool { return floatDType(dtype) || dtype == dtypes.Float16 }

// batchDims is how an error names the leading batch axis of a call's operands: "" without one.
func batchDims(lead, batch int) string {
	if lead == 0 {
		return ""
	}
	return fmt.Sprintf("[%d] + ", batch)
}

// reads are the slots a reads.
func (a *attention) reads() []int {
	return append(append([]int{a.q, a.k, a.v, a.bias}, a.keys...), a.values...)
}

// floats is a buffer's float32, bfloat16 or (a KV cache's blocks only) float16 data.
type floats struct {
	f32 []float32
	b16 []uint16 // bfloat16's bits
	h16 []uint16 // float16's bits
}

func (x floats) len() int { return len(x.f32) + len(x.b16) + len(x.h16) }

// part is the n values of x from i.
func (x floats) part(i, n int) floats {
	switch {
	case x.f32 != nil:
		return floats{f32: x.f32[i : i+n : i+n]}
	case x.h16 != nil:
		return floats{h16: x.h16[i : i+n : i+n]}
	}
	return floats{b16: x.b16[i : i+n : i+n]}
}

// widenTo writes x's values [i, i+len(dst)) into dst as float32, the dtype chosen once (a
// call a value, not inlined once float16 joined, cost a bfloat16 step's attention 0.3–0.5 ms).
func (x floats) widenTo(dst []float32, i int) {
	switch {
	case x.f32 != nil:
		copy(dst, x.f32[i:i+len(dst)])
	case x.h16 != nil:
		widenHalfAll(dst, x.h16[i:i+len(dst)])
	default:
		widenAll(dst, x.b16[i:i+len(dst)])
	}
}

// scoresPair is scoresPair32, or its bfloat16 or float16 twin, on x's transposed key block [hd,
// n] from value base, hd = len(q0).
func (x floats) scoresPair(q0, q1 []float32, base, n, m int, s0, s1 []float32) {
	end := base + len(q0)*n
	switch {
	case x.f32 != nil:
		scoresPair32(q0, q1, x.f32[base:end], n, m, s0, s1)
	case x.h16 != nil:
		scoresPairHalf(q0, q1, x.h16[base:end], n, m, s0, s1)
	default:
		scoresPair16(q0, q1, x.b16[base:end], n, m, s0, s1)
	}
}

// contextPair is contextPair32, or its bfloat16 or float16 twin, on x's m value rows [m, hd] from
// value base.
func (x floats) contextPair(p0, p1 []float32, base, hd, m int, c0, c1 []float32) {
	end := base + m*hd
	switch {
	case x.f32 != nil:
		contextPair32(p0, p1, x.f32[base:end], hd, m, c0, c1)
	case x.h16 != nil:
		contextPairHalf(p0, p1, x.h16[base:end], hd, m, c0, c1)
	default:
		contextPair16(p0, p1, x.b16[base:end], hd, m, c0, c1)
	}
}

// readFloats is buf's data as floats: float32 as it is, bfloat16 and float16 as their bits (for
// the kernels).
func readFloats(buf compute.Buffer) (floats, error) {
	flat, err := buf.Data()
	if err != nil {
		return floats{}, err
	}
	return floatsOf(flat)
}

// attendRun is a's operands in one call.
type attendRun struct {
	a            *attention
	q, k, v      floats
	bias         []float32
	keys, values []floats
	attended     int // the blocks' slots read: up to the last one any row attends
	out32        []float32
	out16        []bfloat16.BFloat16
	half         bool // q's dtype is bfloat16: the probabilities are rounded to it
	scale        float32
}

// headScratch is one worker's float32 memory for a kv head: its query rows scaled, the chunk's
// keys widened, the rows' scores (and then probabilities), their context, and spare rows for an
// odd row's pair.
type headScratch struct {
	qs, keys, scores, ctx []float32
	spareScores, spareCtx []float32
}

// runAttentions runs as (calls that do not read each other's results: a batch's sequences, or
// one call for them all), each result put in its slot, the kv heads of every sequence shared out
// among the workers at once: a step of 8 sequences ran 1.03–1.07× as fast as with one call at a
// time and a piece of the wrapped backend's between calls (docs/performance.md, "A batch's
// attention in one step"). The crew then waits for its next job awake for up to spin.
func (e *executable) runAttentions(as []*attention, slots []compute.Buffer, owned []holding, device compute.DeviceNum, spin time.Duration) error {
	e.backend.attentionSteps.Add(1)
	var runs []attendRun                         // one per sequence of every call
	heads, rows, seq, width, hd := 0, 0, 0, 0, 0 // the most any call needs: a worker's scratch
	for _, a := range as {
		var err error
		if runs, err = e.prepareAttention(a, slots, owned, device, runs); err != nil {
			return err
		}
		heads += a.batch * a.kvHeads
		rows, seq, width, hd = max(rows, a.rows), max(seq, a.seq), max(width, a.slots+a.seq), max(hd, a.hd)
	}
	workers := min(e.backend.opts.Workers, heads)
	s := e.backend.takeScratch()
	defer e.backend.putScratch(s)
	scratch := make([]headScratch, workers)
	for w := range scratch {
		scratch[w] = headScratch{
			qs: s.take(rows * hd), keys: s.take(seq * hd), scores: s.take(rows * width),
			ctx: s.take(rows * hd), spareScores: s.take(width), spareCtx: s.take(hd),
		}
	}
	var next atomic.Int64 // the next (sequence, kv head) to take, counted across the sequences
	work := func(w int) {
		run := 0
		for first := 0; ; {
			h := int(next.Add(1)) - 1
			for run < len(runs) && h >= first+runs[run].a.kvHeads {
				first += runs[run].a.kvHeads
				run++
			}
			if run == len(runs) {
				return
			}
			runs[run].head(h-first, scratch[w])
		}
	}
	e.backend.shareOut(workers, work, spin)
	return nil
}

// prepareAttention reads a's operands and checks them against its shapes, makes its output
// buffer, put in its slot, and appends to runs a run for each of a's sequences: its parts of the
// operands and of the output.
func (e *executable) prepareAttention(a *attention, slots []compute.Buffer, owned []holding, device compute.DeviceNum, runs []attendRun) ([]attendRun, error) {
	e.backend.attendedRun.Add(1)
	var err error
	read := func(what string, slot int) floats {
		if err != nil {
			return floats{}
		}
		var x floats
		if x, err = readFloats(slots[slot]); err != nil {
			err = fmt.Errorf("hostproduct: attention's %s: %w", what, err)
		}
		return x
	}
	q, k, v := read("q", a.q), read("k", a.k), read("v", a.v)
	bias := read("bias", a.bias)
	var keys, values []floats
	for i := range a.keys {
		keys = append(keys, read("key block", a.keys[i]))
		values = append(values, read("value block", a.values[i]))
	}
	if err != nil {
		return runs, err
	}
	qLen, kLen, biasLen := a.kvHeads*a.rows*a.hd, a.kvHeads*a.seq*a.hd, a.seq*(a.slots+a.seq) // a sequence's
	if q.len() != a.batch*qLen || k.len() != a.batch*kLen || v.len() != k.len() || len(bias.f32) != a.batch*biasLen {
		return runs, errors.New("hostproduct: attention's operands do not hold their shapes' values")
	}
	for i := range keys {
		n := a.sizes[i%len(a.sizes)]
		if keys[i].len() != a.kvHeads*a.hd*n || values[i].len() != a.kvHeads*a.hd*n {
			return runs, fmt.Errorf("hostproduct: attention's block %d does not hold its shape's values", i)
		}
	}
	flat, err := e.backend.putResult(slots, owned, a.out, device, a.outShape)
	if err != nil {
		return runs, fmt.Errorf("hostproduct: attention's output: %w", err)
	}
	out32, _ := flat.([]float32)
	out16, _ := flat.([]bfloat16.BFloat16)
	if out32 == nil && out16 == nil {
		return runs, fmt.Errorf("hostproduct: attention's output is %T", flat)
	}
	blocks := len(a.sizes)
	for b := range a.batch {
		r := attendRun{a: a, scale: float32(1 / math.Sqrt(float64(a.hd))), half: q.b16 != nil,
			q: q.part(b*qLen, qLen), k: k.part(b*kLen, kLen), v: v.part(b*kLen, kLen),
			bias: bias.f32[b*biasLen : (b+1)*biasLen],
			keys: keys[b*blocks : (b+1)*blocks], values: values[b*blocks : (b+1)*blocks]}
		if out32 != nil {
			r.out32 = out32[b*qLen : (b+1)*qLen]
		} else {
			r.out16 = out16[b*qLen : (b+1)*qLen]
		}
		r.attended = attendedSlots(r.bias, a.seq, a.slots)
		runs = append(runs, r)
	}
	return runs, nil
}

// attendedSlots is one past the last of the cache's slots that any of the chunk's seq positions
// attends (bias [seq, slots+seq] finite there).
func attendedSlots(bias []float32, seq, slots int) int {
	stride := slots + seq
	for t := slots - 1; t >= 0; t-- {
		for s := range seq {
			if !math.IsInf(float64(bias[s*stride+t]), -1) {
				return t + 1
			}
		}
	}
	return 0
}

// head computes kv head h's rows with scratch x. Rows go two at a time through the kernels (an
// odd last row pairs with itself, its second results going to a spare row).
func (r *attendRun) head(h int, x headScratch) {
	a := r.a
	rows, hd, stride := a.rows, a.hd, a.slots+a.seq
	qs := x.qs[:rows*hd]
	r.q.widenTo(qs, h*rows*hd)
	for i := range qs {
		qs[i] *= r.scale
	}
	// pair is rows i and i+1 of buf, or for an odd last row that row and odd.
	pair := func(i int, buf []float32, width int, odd []float32) ([]float32, []float32) {
		first := buf[i*width : (i+1)*width]
		if i+1 < rows {
			return first, buf[(i+1)*width : (i+2)*width]
		}
		if odd == nil {
			return first, first
		}
		return first, odd[:width]
	}
	// Scores against the blocks' attended slots, and against the chunk's own keys.
	for i := 0; i < rows; i += 2 {
		q0, q1 := pair(i, x.qs, hd, nil)
		s0, s1 := pair(i, x.scores, stride, x.spareScores)
		offset := 0
		for b, n := range a.sizes {
			m := min(n, r.attended-offset)
			if m <= 0 {
				break
			}
			r.keys[b].scoresPair(q0, q1, h*hd*n, n, m, s0[offset:], s1[offset:])
			offset += n
		}
	}
	own := x.keys[:a.seq*hd] // the chunk's keys of head h, widened
	r.k.widenTo(own, h*a.seq*hd)
	for i := range rows {
		qi := x.qs[i*hd : (i+1)*hd]
		for j := range a.seq {
			var sum float32
			for d, k := range own[j*hd : (j+1)*hd] {
				sum += qi[d] * k
			}
			x.scores[i*stride+a.slots+j] = sum
		}
	}
	// The bias, then softmax over the attended slots and the chunk.
	for i := range rows {
		s := i % a.seq
		softmax(x.scores[i*stride:(i+1)*stride], r.bias[s*stride:(s+1)*stride], r.attended, a.slots, r.half)
	}
	// The context: the attended slots' value rows and the chunk's own, weighted by the
	// probabilities.
	clear(x.ctx[:rows*hd])
	for i := 0; i < rows; i += 2 {
		p0, p1 := pair(i, x.scores, stride, nil)
		c0, c1 := pair(i, x.ctx, hd, x.spareCtx)
		if i+1 >= rows {
			clear(c1)
		}
		offset := 0
		for b, n := range a.sizes {
			m := min(n, r.attended-offset)
			if m <= 0 {
				break
			}
			r.values[b].contextPair(p0[offset:], p1[offset:], h*n*hd, hd, m, c0, c1)
			offset += n
		}
		r.v.contextPair(p0[a.slots:], p1[a.slots:], h*a.seq*hd, hd, a.seq, c0, c1)
	}
	out := h * rows * hd
	if r.out32 != nil {
		copy(r.out32[out:out+rows*hd], x.ctx[:rows*hd])
		return
	}
	narrowAll(bitsOf(r.out16[out:out+rows*hd]), x.ctx[:rows*hd])
}

// softmax turns one row's scores sc [slots+S] into probabilities: the bias added, then
// normalized over the attended slots [0, attended) and the chunk's [slots, slots+S) (the
// slots between are attended by no row), rounded to bfloat16 where half. Each pass runs on
// vectors where this CPU has the kernels (biasMax, expSum, scaleAll, roundAll): at depth 4,096 the plain
// loops, math.Exp in float64, were a third of attention's time with the cache in the L3.
func softmax(sc, bias []float32, attended, slots int, half bool) {
	parts := [2][2]int{{0, attended}, {slots, len(sc)}}
	highest := float32(math.Inf(-1))
	for _, p := range parts {
		highest = max(highest, biasMax(sc[p[0]:p[1]], bias[p[0]:p[1]]))
	}
	var sum float32
	for _, p := range parts {
		sum += expSum(sc[p[0]:p[1]], highest)
	}
	inv := 1 / sum
	for _, p := range parts {
		scaleAll(sc[p[0]:p[1]], inv)
		if half {
			roundAll(sc[p[0]:p[1]])
		}
	}
}

// biasMaxPlain adds bias to sc and returns the largest sum (−∞ for none).
func biasMaxPlain(sc, bias []float32) float32 {
	highest := float32(math.Inf(-1))
	bias = bias[:len(sc)]
	for t := range sc {
		sc[t] += bias[t]
		highest = max(highest, sc[t])
	}
	return highest
}

// expSumPlain replaces each of sc by exp(sc − highest) and returns their sum.
func expSumPlain(sc []float32, highest float32) float32 {
	var sum float32
	for t, v := range sc {
		e := float32(math.Exp(float64(v - highest)))
		sc[t] = e
		sum += e
	}
	return sum
}

// scalePlain multiplies each of sc by k.
func scalePlain(sc []float32, k float32) {
	for t := range sc {
		sc[t] *= k
	}
}

// roundPlain rounds each of x to bfloat16's precision in place, as bfloat16.FromFloat32 rounds.
func roundPlain(x []float32) {
	for t, v := range x {
		x[t] = bfloat16.FromFloat32(v).Float32()
	}
}

// widenPlain writes the bfloat16 values src (their bits) into dst as float32, one at a time.
func widenPlain(dst []float32, src []uint16) {
	dst = dst[:len(src)]
	for i, v := range src {
		dst[i] = widen16(v)
	}
}

// narrowPlain writes the float32 values src into dst rounded to bfloat16 (their bits).
func narrowPlain(dst []uint16, src []float32) {
	dst = dst[:len(src)]
	for i, v := range src {
		dst[i] = bits16(v)
	}
}

// narrowHalfPlain writes the float32 values src into dst rounded to float16 (their bits), as
// compute rounds them (float16.FromFloat32: to nearest, ties to even).
func narrowHalfPlain(dst []uint16, src []float32) {
	dst = dst[:len(src)]
	for i, v := range src {
		dst[i] = uint16(float16.FromFloat32(v))
	}
}

// widenHalfPlain writes the float16 values src (their bits) into dst as float32, exactly.
func widenHalfPlain(dst []float32, src []uint16) {
	dst = dst[:len(src)]
	for i, v := range src {
		dst[i] = widenHalf(v)
	}
}

// widen16 is a bfloat16's bits as float32.
func widen16(x uint16) float32 { return math.Float32frombits(uint32(x) << 16) }

// widenHalf is a float16's bits as float32 (exact).
func widenHalf(x uint16) float32 { return float16.Float16(x).Float32() }

// scoresPairPlain is scoresPair32's slots [from, m) in plain Go, the key block's values widened
// by float.
func scoresPairPlain[T any](q0, q1 []float32, kt []T, n, from, m int, s0, s1 []float32, float func(T) float32) {
	for t := from; t < m; t++ {
		var a, b float32
		for d, x := range q0 {
			k := float(kt[d*n+t])
			a += x * k
			b += q1[d] * k
		}
		s0[t], s1[t] = a, b
	}
}

// contextPairPlain is contextPair32 in plain Go, the value rows widened by float.
func contextPairPlain[T any](p0, p1 []float32, vb []T, hd, m int, c0, c1 []float32, float func(T) float32) {
	for t := range m {
		row := vb[t*hd : (t+1)*hd]
		for j, v := range row {
			w := float(v)
			c0[j] += p0[t] * w
			c1[j] += p1[t] * w
		}
	}
}
