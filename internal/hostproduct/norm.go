package hostproduct

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync/atomic"
	"unsafe"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes/bfloat16"
	"github.com/gomlx/compute/dtypes/float16"
	"github.com/gomlx/compute/shapes"
)

// NormFunction begins the name of every graph function (compute.Builder.NewFunction) that this
// backend runs in Go as an RMS normalization over the last axis (transformers' Qwen3RMSNorm),
// followed by " eps=" and its ε (strconv's form of a float64; anything after a further "#" is
// free). Its body, the definition, is never compiled, and each call of it ends the current
// piece like a product. Two forms:
//
//   - x [..., d] (float32 or bfloat16) and weight [d] of x's dtype: one result, x's shape and
//     dtype, weight · (x · rsqrt(mean(x²) + ε)), the statistics in float32 (x widened), the
//     normalized x rounded to the dtype before the weight's product and that product rounded;
//   - a and b of one shape [..., d], then weight: two results, h = a + b rounded to the dtype (a
//     residual connection) and h's normalization as above.
//
// mean(x²) is the sum of squares (accumulated in float64, then rounded to float32) times 1/d in
// float32, rsqrt 1 / √ in float32: as compute's definition computes it, up to the
// order of the sum. A prompt's rows are shared out over the crew. In a Qwen3-0.6B decode step compute spent 55–90 µs a layer on the residual connection and
// the norm after it, a piece of ten operations, on a 2-core Xeon guest where a call in Go takes
// a few.
const NormFunction = "hostproduct.rmsnorm"

// RopeFunction begins the name of every graph function that this backend runs in Go as rotary
// position embedding with split pairing (transformers' rotate_half): parameters x [..., heads,
// hd] (float32 or bfloat16, hd even) and the tables cos and sin [..., 1, hd] of x's dtype (the
// same leading axes, one row for every head), sin already signed as cat(−sin, sin); its one
// result, x's shape, is x · cos + swap(x) · sin, swap exchanging each head's halves, each
// product and the sum rounded to the dtype (no fused multiply-add), as the definition's
// operations on compute round them.
const RopeFunction = "hostproduct.rope"

// isNorm and isRope say whether the host function named name is a norm or a rope one.
func isNorm(name string) bool { return strings.HasPrefix(name, NormFunction) }
func isRope(name string) bool { return strings.HasPrefix(name, RopeFunction) }

// NormName is the name NormFunction's functions begin with for ε eps.
func NormName(eps float64) string {
	return NormFunction + " eps=" + strconv.FormatFloat(eps, 'g', -1, 64)
}

// normEps is the ε a norm function's name gives.
func normEps(name string) (float64, error) {
	rest, ok := strings.CutPrefix(name, NormFunction+" eps=")
	if !ok {
		return 0, badCall(name)("want a name %q followed by its ε", NormFunction+" eps=")
	}
	if i := strings.IndexByte(rest, '#'); i >= 0 {
		rest = rest[:i]
	}
	eps, err := strconv.ParseFloat(rest, 64)
	if err != nil || !(eps >= 0) || math.IsInf(eps, 0) {
		return 0, badCall(name)("ε %q: want a finite number ≥ 0", rest)
	}
	return eps, nil
}

// norm is one call of a norm function, run in Go.
type norm struct {
	x, b, w  int // slots: x (a in the residual form), b (−1 without one), the weight
	sum, out int // result slots: h (−1 without a residual) and the normalized
	shape    shapes.Shape
	eps      float32
}

// newNorm checks a call's arguments against NormFunction's form and h's parameters.
func newNorm(name string, h *hostFunction, inputs []compute.Value) (*norm, error) {
	bad := badCall(name)
	eps, err := normEps(name)
	if err != nil {
		return nil, err
	}
	if len(inputs) != 2 && len(inputs) != 3 {
		return nil, bad("%d parameters, want x and weight, or a, b and weight", len(inputs))
	}
	shape, err := h.argShapes(name, inputs, len(inputs)-1)
	if err != nil {
		return nil, err
	}
	x, w := shape[0], shape[len(shape)-1]
	if !floatDType(x.DType) || x.Rank() < 1 {
		return nil, bad("x %s, want float32 or bfloat16 of rank ≥ 1", x)
	}
	if len(shape) == 3 && !shape[1].Equal(x) {
		return nil, bad("a %s and b %s, want one shape", x, shape[1])
	}
	if w.DType != x.DType || w.Rank() != 1 || w.Dimensions[0] != x.Dimensions[x.Rank()-1] {
		return nil, bad("weight %s for x %s, want [%d] of x's dtype", w, x, x.Dimensions[x.Rank()-1])
	}
	for i, r := range h.result {
		if !r.Equal(x) {
			return nil, bad("result %d is %s, want %s", i, r, x)
		}
	}
	return &norm{shape: x, eps: float32(eps), b: -1, sum: -1}, nil
}

// rope is one call of a rope function, run in Go.
type rope struct {
	x, cos, sin, out int // slots
	shape            shapes.Shape
}

// newRope checks a call's arguments against RopeFunction's form and h's parameters.
func newRope(name string, h *hostFunction, inputs []compute.Value) (*rope, error) {
	bad := badCall(name)
	shape, err := h.argShapes(name, inputs, 1)
	if err != nil {
		return nil, err
	}
	if len(shape) != 3 {
		return nil, bad("%d parameters, want x, cos and sin", len(shape))
	}
	x := shape[0]
	if !floatDType(x.DType) || x.Rank() < 2 || x.Dimensions[x.Rank()-1]%2 != 0 {
		return nil, bad("x %s, want float32 or bfloat16 [..., heads, an even width]", x)
	}
	table := x.Clone()
	table.Dimensions[x.Rank()-2] = 1
	if !shape[1].Equal(table) || !shape[2].Equal(table) {
		return nil, bad("cos %s and sin %s for x %s, want %s", shape[1], shape[2], x, table)
	}
	if !h.result[0].Equal(x) {
		return nil, bad("result %s, want %s", h.result[0], x)
	}
	return &rope{shape: x}, nil
}

// callNorm records a call of norm function h in main: it ends the current piece.
func (f *function) callNorm(h *function, inputs []compute.Value) ([]compute.Value, error) {
	n, err := newNorm(h.name, h.host, inputs)
	if err != nil {
		return nil, err
	}
	slots, err := f.argSlots(h, inputs)
	if err != nil {
		return nil, err
	}
	n.x, n.w = slots[0], slots[len(slots)-1]
	if len(slots) == 3 {
		n.b, n.sum = slots[1], f.b.newSlot()
	}
	n.out = f.b.newSlot()
	return f.record(n, n.shape), nil
}

// callRope records a call of rope function h in main: it ends the current piece.
func (f *function) callRope(h *function, inputs []compute.Value) ([]compute.Value, error) {
	r, err := newRope(h.name, h.host, inputs)
	if err != nil {
		return nil, err
	}
	slots, err := f.argSlots(h, inputs)
	if err != nil {
		return nil, err
	}
	r.x, r.cos, r.sin, r.out = slots[0], slots[1], slots[2], f.b.newSlot()
	return f.record(r, r.shape), nil
}

func (n *norm) reads() []int {
	if n.b >= 0 {
		return []int{n.x, n.b, n.w}
	}
	return []int{n.x, n.w}
}

func (n *norm) writes() []int {
	if n.sum >= 0 {
		return []int{n.sum, n.out}
	}
	return []int{n.out}
}

// run normalizes each row of x (of a + b, written first, in the residual form): the sum into a's
// buffer and the result into b's where the call may reuse them (x's in the plain form), else
// into new ones.
func (n *norm) run(e *executable, c *callState) error {
	x, err := c.read(n.x, "x")
	if err != nil {
		return err
	}
	w, err := c.read(n.w, "weight")
	if err != nil {
		return err
	}
	size, d := n.shape.Size(), n.shape.Dimensions[n.shape.Rank()-1]
	if x.len() != size || w.len() != d {
		return fmt.Errorf("hostproduct: norm function's operands hold %d and %d values for %s", x.len(), w.len(), n.shape)
	}
	if n.b >= 0 {
		b, err := c.read(n.b, "b")
		if err != nil {
			return err
		}
		if b.len() != size {
			return fmt.Errorf("hostproduct: norm function's b holds %d values for %s", b.len(), n.shape)
		}
		h, err := e.result(c, n.sum, n.x, n.shape)
		if err != nil {
			return err
		}
		out, err := e.result(c, n.out, n.b, n.shape)
		if err != nil {
			return err
		}
		e.shareRows(size/d, d, func(lo, hi int) {
			addFloats(x, b, h, lo*d, hi*d)
			normRows(h, w, out, d, lo, hi, n.eps)
		})
	} else {
		out, err := e.result(c, n.out, n.x, n.shape)
		if err != nil {
			return err
		}
		e.shareRows(size/d, d, func(lo, hi int) { normRows(x, w, out, d, lo, hi, n.eps) })
	}
	e.backend.normRun.Add(1)
	return nil
}

// normChunk is about how many values one worker of a norm or rope call takes at a time: a
// decode step's calls run on the caller alone, a prompt's shared out.
const normChunk = 16 << 10

// shareRows runs work over [0, units) in chunks of about normChunk values (size values a
// unit): on the caller where there is one chunk, else shared out over the crew, which then waits
// for the next run awake (crewSpin): in a prompt a run of products follows within microseconds.
func (e *executable) shareRows(units, size int, work func(lo, hi int)) {
	per := max(1, normChunk/size)
	chunks := (units + per - 1) / per
	if chunks <= 1 {
		work(0, units)
		return
	}
	var next atomic.Int64
	e.backend.shareOut(min(e.backend.opts.Workers, chunks), func(int) {
		for c := int(next.Add(1)) - 1; c < chunks; c = int(next.Add(1)) - 1 {
			work(c*per, min((c+1)*per, units))
		}
	}, crewSpin)
}

// addFloats writes a + b into h for the values [lo, hi), rounded to the dtype (h may be a).
func addFloats(a, b, h floats, lo, hi int) {
	if h.f32 != nil {
		b32, h32 := b.f32[lo:hi], h.f32[lo:hi]
		for i, v := range a.f32[lo:hi] {
			h32[i] = v + b32[i]
		}
		return
	}
	add16(a.b16[lo:hi], b.b16[lo:hi], h.b16[lo:hi])
}

// add16Plain writes a + b rounded to bfloat16 into h.
func add16Plain(a, b, h []uint16) {
	b, h = b[:len(a)], h[:len(a)]
	for i, v := range a {
		h[i] = bits16(widen16(v) + widen16(b[i]))
	}
}

// normRows writes the rows [lo, hi) of d values of x normalized, times w, into out (which may
// be x).
func normRows(x, w, out floats, d, lo, hi int, eps float32) {
	scale := float32(1 / float64(d))
	if x.f32 != nil {
		for at := lo * d; at < hi*d; at += d {
			row := x.f32[at : at+d]
			normScale(row, w.f32, out.f32[at:at+d], rsqrtOf(float32(sumSquares(row))*scale+eps))
		}
		return
	}
	var wide [512]float32
	for at := lo * d; at < hi*d; at += d {
		var sum float64
		for i := 0; i < d; i += len(wide) {
			part := wide[:min(len(wide), d-i)]
			widenAll(part, x.b16[at+i:at+i+len(part)])
			sum += sumSquares(part)
		}
		normScale16(x.b16[at:at+d], w.b16, out.b16[at:at+d], rsqrtOf(float32(sum)*scale+eps))
	}
}

// normScale16Plain writes w · round16(x · r), rounded to bfloat16, into out (out may be x).
func normScale16Plain(x, w, out []uint16, r float32) {
	w, out = w[:len(x)], out[:len(x)]
	for i, v := range x {
		out[i] = bits16(widen16(w[i]) * round16(widen16(v)*r))
	}
}

// sumSquares is the sum of x's squares in float64 (each square exact), in four partial sums.
func sumSquares(x []float32) float64 {
	var s [4]float64
	v := len(x) &^ 3
	for i := 0; i < v; i += 4 {
		a, b, c, d := float64(x[i]), float64(x[i+1]), float64(x[i+2]), float64(x[i+3])
		s[0] += a * a
		s[1] += b * b
		s[2] += c * c
		s[3] += d * d
	}
	for _, a := range x[v:] {
		s[0] += float64(a) * float64(a)
	}
	return (s[0] + s[1]) + (s[2] + s[3])
}

// normScalePlain writes w · (x · r) into out (out may be x).
func normScalePlain(x, w, out []float32, r float32) {
	w, out = w[:len(x)], out[:len(x)]
	for i, v := range x {
		out[i] = w[i] * (v * r)
	}
}

// rotateHalvesPlain writes x · cos + swap(x) · sin into out for one head (out may be x), each
// product rounded before the sum.
func rotateHalvesPlain(x, cos, sin, out []float32) {
	half := len(x) / 2
	for i := range half {
		lo, hi := x[i], x[i+half]
		out[i] = float32(lo*cos[i]) + float32(hi*sin[i])
		out[i+half] = float32(hi*cos[i+half]) + float32(lo*sin[i+half])
	}
}

// rotateHalves16Plain is rotateHalvesPlain for a bfloat16 head and tables (their bits), each
// product rounded to bfloat16, then their sum.
func rotateHalves16Plain(x, cos, sin, out []uint16) {
	half := len(x) / 2
	for i := range half {
		lo, hi := widen16(x[i]), widen16(x[i+half])
		out[i] = bits16(round16(lo*widen16(cos[i])) + round16(hi*widen16(sin[i])))
		out[i+half] = bits16(round16(hi*widen16(cos[i+half])) + round16(lo*widen16(sin[i+half])))
	}
}

// rsqrtOf is 1 / √v in float32, as compute's Rsqrt computes it.
func rsqrtOf(v float32) float32 { return 1 / float32(math.Sqrt(float64(v))) }

func (r *rope) reads() []int  { return []int{r.x, r.cos, r.sin} }
func (r *rope) writes() []int { return []int{r.out} }

// run rotates each head of x by its position's tables, into x's buffer where the call may
// reuse it, else a new one.
func (r *rope) run(e *executable, c *callState) error {
	x, err := c.read(r.x, "x")
	if err != nil {
		return err
	}
	cos, err := c.read(r.cos, "cos")
	if err != nil {
		return err
	}
	sin, err := c.read(r.sin, "sin")
	if err != nil {
		return err
	}
	dims := r.shape.Dimensions
	hd, heads := dims[len(dims)-1], dims[len(dims)-2]
	if x.len() != r.shape.Size() || cos.len() != x.len()/heads || sin.len() != cos.len() {
		return fmt.Errorf("hostproduct: rope function's operands hold %d, %d and %d values for %s", x.len(), cos.len(), sin.len(), r.shape)
	}
	if hd > 512 {
		return fmt.Errorf("hostproduct: rope function's heads are %d wide, at most 512", hd)
	}
	out, err := e.result(c, r.out, r.x, r.shape)
	if err != nil {
		return err
	}
	e.shareRows(x.len()/hd, hd, func(lo, hi int) { // over the heads of every position
		for u := lo; u < hi; u++ {
			at, p := u*hd, u/heads*hd
			if x.f32 != nil {
				rotateHalves(x.f32[at:at+hd], cos.f32[p:p+hd], sin.f32[p:p+hd], out.f32[at:at+hd])
			} else {
				rotateHalves16(x.b16[at:at+hd], cos.b16[p:p+hd], sin.b16[p:p+hd], out.b16[at:at+hd])
			}
		}
	})
	e.backend.ropeRun.Add(1)
	return nil
}

// bitsOf is the bfloat16 values s as their bits, the same memory.
func bitsOf(s []bfloat16.BFloat16) []uint16 {
	return unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(s))), len(s))
}

// bits16 is v rounded to bfloat16, as its bits.
func bits16(v float32) uint16 { return uint16(bfloat16.FromFloat32(v)) }

// floatsOf is a buffer's data as floats (see readFloats).
func floatsOf(flat any) (floats, error) {
	switch d := flat.(type) {
	case []float32:
		return floats{f32: d}, nil
	case []bfloat16.BFloat16:
		return floats{b16: bitsOf(d)}, nil
	case []float16.Float16: // a KV cache's blocks, or a conversion's result (isCacheDType)
		return floats{h16: unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(d))), len(d))}, nil
	}
	return floats{}, fmt.Errorf("data of %T", flat)
}
