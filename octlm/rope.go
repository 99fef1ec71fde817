package octlm

import (
	"fmt"
	"math"
	"slices"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // the graph DSL reads best unqualified
	"github.com/gomlx/gomlx/core/tensors"
)

// RoPE rotates one head vector per position on backend with the model's own rotary embedding: the
// graph code attention runs (InvFreq(headDim, base), angles position × inv_freq in float32, split
// or neighbour pairing), outside a model. x[i] is the head at positions[i]; every head has the same
// even width. It is there so that other implementations of RoPE (the notebooks' JavaScript
// playground) can be checked against the graph's.
func RoPE(backend compute.Backend, x [][]float32, positions []int32, base float64, split bool) ([][]float32, error) {
	if len(x) == 0 || len(x) != len(positions) {
		return nil, fmt.Errorf("octlm: RoPE: %d vectors and %d positions: want as many of each, at least one", len(x), len(positions))
	}
	headDim := len(x[0])
	if headDim < 2 || headDim%2 != 0 {
		return nil, fmt.Errorf("octlm: RoPE: head width %d: want an even width ≥ 2", headDim)
	}
	for i, v := range x {
		if len(v) != headDim {
			return nil, fmt.Errorf("octlm: RoPE: vector %d has %d channels, vector 0 has %d", i, len(v), headDim)
		}
	}
	if !(base > 1) {
		return nil, fmt.Errorf("octlm: RoPE: base %g: want a base > 1", base)
	}
	exec, err := NewExec(backend, func(x, positions *Node) *Node {
		return Squeeze(newRotary(positions, headDim, base, split).apply(ops{}, InsertAxes(x, 1)), 1) // [S, 1 head, headDim] → [S, headDim]
	})
	if err != nil {
		return nil, fmt.Errorf("octlm: RoPE: %w", err)
	}
	defer exec.Finalize()
	out, err := exec.Call(tensors.FromValue(x), tensors.FromValue(positions))
	if err != nil {
		return nil, fmt.Errorf("octlm: RoPE: %w", err)
	}
	defer out[0].FinalizeAll()
	rotated, ok := out[0].Value().([][]float32)
	if !ok {
		return nil, fmt.Errorf("octlm: RoPE: the graph returned %s, want float32 [%d, %d]", out[0].Shape(), len(x), headDim)
	}
	return rotated, nil
}

// rotaryTables are cos and sin of the angles position × InvFreq(headDim, base) in float32,
// positions [..., S]: [..., S, headDim/2].
func rotaryTables(positions *Node, headDim int, base float64) (cos, sin *Node) {
	g := positions.Graph()
	angles := InsertAxes(ConvertDType(positions, dtypes.Float32), -1)
	freqs := Mul(angles, broadcastLast(Const(g, InvFreq(headDim, base)), angles))
	return Cos(freqs), Sin(freqs)
}

// InvFreq returns RoPE's inverse frequencies 1 / base^(2i/dim) for i < dim/2, rounded at each
// step to float32 as transformers' _compute_default_rope_parameters computes them.
func InvFreq(dim int, base float64) []float32 {
	out := make([]float32, dim/2)
	for i := range out {
		exponent := float32(2*i) / float32(dim)
		p := float32(math.Pow(float64(float32(base)), float64(exponent)))
		out[i] = 1 / p
	}
	return out
}

// rotary is RoPE's tables for a step, made once for every layer (as transformers' rotary
// embedding module makes cos and sin once a forward pass): cos and sin of rotaryTables broadcast
// over heads, [..., S, 1, headDim/2]. With split pairing they are made whole once, cos as
// cat(cos, cos) and sin as cat(−sin, sin) [..., S, 1, headDim]: rotate_half's sign on the table.
// Each head count and dtype's tables as apply multiplies them are made once too (spread).
type rotary struct {
	cos, sin *Node
	split    bool
	spread   map[rotaryKey][2]*Node
}

// rotaryKey is the heads and dtype of the tables apply multiplies a tensor by.
type rotaryKey struct {
	heads int
	dtype dtypes.DType
}

// newRotary is the rotary tables of positions [..., S] for heads of headDim channels.
func newRotary(positions *Node, headDim int, base float64, split bool) *rotary {
	cos, sin := rotaryTables(positions, headDim, base)
	cos, sin = InsertAxes(cos, cos.Rank()-1), InsertAxes(sin, sin.Rank()-1)
	if split {
		cos = Concatenate([]*Node{cos, cos}, -1)
		sin = Concatenate([]*Node{Neg(sin), sin}, -1)
	}
	return &rotary{cos: cos, sin: sin, split: split, spread: map[rotaryKey][2]*Node{}}
}

// apply rotates x [..., S, heads, headDim] by r's angles, the tables repeated over the heads
// where the layout spreads them (ops.spread). Split pairing (rope_split, Hugging Face's
// rotate_half): channel i rotates with i+headDim/2. Neighbour pairing (classic octlm): channel
// 2i rotates with 2i+1.
func (r *rotary) apply(o ops, x *Node) *Node {
	dims := x.Shape().Dimensions
	cos, sin := r.tables(o, x.DType(), dims[len(dims)-2])
	return rotate(x, cos, sin, r.split)
}

// tables is r's cos and sin in dtype for heads heads, made once for each: repeated over the
// heads where the layout spreads them (ops.spread), else [..., S, 1, headDim] (or headDim/2).
func (r *rotary) tables(o ops, dtype dtypes.DType, heads int) (cos, sin *Node) {
	key := rotaryKey{heads: heads, dtype: dtype}
	tables, ok := r.spread[key]
	if !ok {
		axis := r.cos.Rank() - 2 // the heads'
		tables = [2]*Node{o.spread(ConvertDType(r.cos, dtype), axis, heads), o.spread(ConvertDType(r.sin, dtype), axis, heads)}
		r.spread[key] = tables
	}
	return tables[0], tables[1]
}

// rotate rotates x [..., S, heads, headDim] by the tables cos and sin ([..., S, heads or 1,
// headDim] with split pairing, headDim/2 wide with neighbour pairing; leading axes of 1 may be
// left out).
func rotate(x, cos, sin *Node, split bool) *Node {
	dims := x.Shape().Dimensions
	half := dims[len(dims)-1] / 2
	for cos.Rank() < x.Rank() {
		cos, sin = InsertAxes(cos, 0), InsertAxes(sin, 0)
	}
	lead := dims[:len(dims)-1]
	if split {
		// q_embed = q*cos + rotate_half(q)*sin, rotate_half(x) = cat(−x[..., half:], x[..., :half]):
		// here x's halves swapped times cat(−sin, sin), the same products, one Reverse instead of
		// two slices, a negation and a concatenation.
		halves := Reshape(x, append(slices.Clone(lead), 2, half)...)
		swapped := Reshape(Reverse(halves, x.Rank()-1), dims...)
		return Add(Mul(x, cos), Mul(swapped, sin))
	}
	pairs := Reshape(x, append(slices.Clone(lead), half, 2)...)
	even := Reshape(SliceAxis(pairs, -1, AxisRange(0, 1)), append(slices.Clone(lead), half)...)
	odd := Reshape(SliceAxis(pairs, -1, AxisRange(1, 2)), append(slices.Clone(lead), half)...)
	outEven := Sub(Mul(even, cos), Mul(odd, sin))
	outOdd := Add(Mul(odd, cos), Mul(even, sin))
	return Reshape(Stack([]*Node{outEven, outOdd}, -1), dims...)
}
