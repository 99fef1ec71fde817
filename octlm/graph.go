package octlm

// The decoder as one GoMLX graph, written to be read beside transformers'
// models/qwen3/modeling_qwen3.py: the names (input_layernorm, q_proj, q_norm, rotate_half,
// o_proj, post_attention_layernorm, gate_proj, up_proj, down_proj, norm, lm_head) are theirs.
//
// One graph serves the full path and the cached path: it takes a chunk of S token IDs (padded to
// a length bucket; only the first `valid` are real) that start at cache position `start`, writes
// their keys and values into a KV cache of fixed capacity, attends over the first Lb cache slots
// (Lb ≥ start+S, see attendLength), and returns logits for the rows listed in logitRows only. A
// long prompt runs as several such steps (see Model.run).

import (
	"math"
	"slices"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/shapes"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // the graph DSL reads best unqualified
)

// stepInputs are the non-weight inputs of the step graph, in order.
const (
	inIDs       = iota // int32 [S]: token IDs, padded
	inStart            // int32 []: cache position of ids[0]
	inValid            // int32 []: how many of the S ids are real
	inKeyPos           // int32 [Lb]: 0..Lb-1, the cache slots attended to (its length sets Lb)
	inLogitRows        // int32 [P]: rows of the chunk whose logits are returned
	numStepInputs
)

// stepGraph builds the decoder step. inputs: the step inputs above, then the weights in
// weightOrder, then the KV cache (k, v for each layer, each [kvHeads, capacity, headDim]).
// Outputs: logits [P, vocab] in float32, then the updated caches in the same order.
func (m *Model) stepGraph(g *Graph, inputs []*Node) []*Node {
	c := m.Config
	ids, start, valid := inputs[inIDs], inputs[inStart], inputs[inValid]
	keyPos, logitRows := inputs[inKeyPos], inputs[inLogitRows]
	w := m.unflattenWeights(inputs[numStepInputs : numStepInputs+m.numWeights()])
	caches := inputs[numStepInputs+m.numWeights():]

	// Position of each token in the sequence and the mask of real (non-padding) tokens.
	offsets := Iota(g, ids.Shape(), 0)                                      // [S]: 0..S-1
	positions := Add(start, offsets)                                        // [S]
	real := LessThan(offsets, valid)                                        // [S] bool
	cos, sin := m.rotaryEmbedding(positions)                                // [S, headDim/2] each, float32
	causal := LessOrEqual(InsertAxes(keyPos, 0), InsertAxes(positions, -1)) // [S, Lb]

	// embed_tokens
	hidden := embed(w.embed, ids, m.embedSlices) // [S, d]

	newCaches := make([]*Node, 0, len(caches))
	for i, layer := range w.layers {
		// Self-attention block with a residual connection.
		residual := hidden
		x := rmsNorm(hidden, layer.inputLayernorm, c.Eps())
		attn, k, v := m.attention(x, layer, cos, sin, causal, caches[2*i], caches[2*i+1], start, real)
		hidden = Add(residual, attn)
		newCaches = append(newCaches, k, v)

		// Feed-forward block with a residual connection.
		residual = hidden
		x = rmsNorm(hidden, layer.postAttentionLayernorm, c.Eps())
		hidden = Add(residual, mlp(x, layer))
	}

	// Only the rows that need logits go through the final norm and the vocabulary projection.
	hidden = Gather(hidden, InsertAxes(logitRows, -1)) // [P, d]
	hidden = rmsNorm(hidden, w.norm, c.Eps())
	logits := lmHead(hidden, w.lmHead, c.VocabSize) // [P, vocab]
	logits = ConvertDType(logits, dtypes.Float32)
	return append([]*Node{logits}, newCaches...)
}

// embed looks token IDs up in embed_tokens, stored as columns [d, vocab] (token id is column
// id) or as row blocks [blocks, rows, d] (token id is row id % rows of block id / rows); see
// layout in weights.go. With bySlices (one block only) each token's row is a DynamicSlice of
// its own: GoMLX's ONNX Runtime backend turns a Gather into a Transpose of the whole table
// (even an identity one) and a GatherND, a 600 MB copy on every step. One node per token makes
// long chunks slow to compile (7.5 s for 1024 tokens against 0.5), once per length bucket.
func embed(table, ids *Node, bySlices bool) *Node {
	if bySlices && table.Rank() == 3 && table.Shape().Dimensions[0] == 1 {
		rows, d := table.Shape().Dimensions[1], table.Shape().Dimensions[2]
		flat := Reshape(table, rows, d)
		zero := ScalarZero(ids.Graph(), ids.DType())
		parts := make([]*Node, ids.Shape().Dimensions[0])
		for i := range parts {
			id := Reshape(SliceAxis(ids, 0, AxisElem(i))) // scalar
			parts[i] = DynamicSlice(flat, []*Node{id, zero}, []int{1, d})
		}
		if len(parts) == 1 {
			return parts[0]
		}
		return Concatenate(parts, 0)
	}
	if table.Rank() == 2 {
		d := table.Shape().Dimensions[0]
		columns := GatherSlices(table, []int{1}, InsertAxes(ids, -1), []int{1}, false) // [S, d, 1]
		return Reshape(columns, ids.Shape().Dimensions[0], d)
	}
	rows := table.Shape().Dimensions[1]
	block := DivScalar(ids, rows)
	row := Sub(ids, MulScalar(block, rows))
	return Gather(table, Stack([]*Node{block, row}, -1)) // [S, d]
}

// lmHead is the output head: logits = hidden · headᵀ, where head is lm_head.weight, or
// embed_tokens when tied; hidden is [P, d]. A head stored as columns [d, vocab] is the plain
// product's right operand. Stored as row blocks [blocks, rows, d] (the embedding's layout),
// every block is one batch of the product and the zero rows past the vocabulary in the last
// block are cut off.
//
// The product runs in the head's dtype: compute v0.1.14's pure-Go DotGeneral multiplies
// half-precision operands in these layouts correctly, with a float32 accumulator, so the head
// is not widened to a float32 copy (for Qwen3-8B in bfloat16 that copy would be 2.5 GB per step).
func lmHead(hidden, head *Node, vocab int) *Node {
	if head.Rank() == 2 {
		p := hidden.Shape().Dimensions[0]
		hidden = padRows(hidden, 0, head.Shape().Size())
		logits := DotGeneral(hidden, []int{1}, nil, head, []int{0}, nil) // [P, vocab]
		return SliceAxis(logits, 0, AxisRange(0, p))
	}
	blocks, rows, d := head.Shape().Dimensions[0], head.Shape().Dimensions[1], head.Shape().Dimensions[2]
	p := hidden.Shape().Dimensions[0]
	perBlock := BroadcastToDims(InsertAxes(hidden, 0), blocks, p, d)
	logits := DotGeneral(perBlock, []int{2}, []int{0}, head, []int{2}, []int{0}) // [blocks, P, rows]
	logits = Reshape(TransposeAllAxes(logits, 1, 0, 2), p, blocks*rows)          // [P, blocks·rows]
	if blocks*rows > vocab {
		logits = SliceAxis(logits, 1, AxisRange(0, vocab))
	}
	return logits
}

// rmsNorm is Qwen3RMSNorm: statistics in float32, then weight * normalized (no 1+w).
func rmsNorm(x, weight *Node, eps float64) *Node {
	dtype := x.DType()
	x32 := ConvertDType(x, dtypes.Float32)
	variance := ReduceAndKeep(Square(x32), ReduceMean, -1)
	x32 = divSqrt(x32, AddScalar(variance, eps))
	for weight.Rank() < x.Rank() {
		weight = InsertAxes(weight, 0)
	}
	return Mul(weight, ConvertDType(x32, dtype))
}

// divSqrt is x / √v as torch.rsqrt computes it, x · rsqrt(v). Backends without Rsqrt (GoMLX's
// ONNX Runtime backend has none) divide by the square root instead, which differs only in the
// last bit.
func divSqrt(x, v *Node) *Node {
	if x.Graph().Backend().Capabilities().Operations[compute.OpTypeRsqrt] {
		return Mul(x, Rsqrt(v))
	}
	return Div(x, Sqrt(v))
}

// The Linear layers run as tensor parallelism splits them over devices (see layout), with
// the blocks as a batch axis: q_proj, k_proj, v_proj, gate_proj and up_proj split by output
// columns leave their result in blocks, [blocks, S, out/blocks]; o_proj and down_proj, split by
// input rows, take those blocks and sum the blocks' partial products. nn.Linear's x·Wᵀ is the
// same product; the weights are stored transposed, [in, out], cut into blocks.

// columnParallel is nn.Linear (no bias) on x [S, in] with the weight in output blocks
// [blocks, in, out/blocks]; the result stays in blocks: [blocks, S, out/blocks].
func columnParallel(x, weight *Node) *Node {
	blocks, in := weight.Shape().Dimensions[0], weight.Shape().Dimensions[1]
	rows := x.Shape().Dimensions[0]
	x = padRows(x, 0, weight.Shape().Size()/blocks)
	perBlock := BroadcastToDims(InsertAxes(x, 0), blocks, x.Shape().Dimensions[0], in)
	out := DotGeneral(perBlock, []int{2}, []int{0}, weight, []int{1}, []int{0})
	return SliceAxis(out, 1, AxisRange(0, rows))
}

// rowParallel is nn.Linear (no bias) on x in blocks [blocks, S, in/blocks] with the weight in
// matching input blocks [blocks, in/blocks, out]: the sum of the blocks' products, [S, out].
// The partial products are summed in float32, as one matmul's accumulator would.
func rowParallel(x, weight *Node) *Node {
	rows := x.Shape().Dimensions[1]
	x = padRows(x, 1, weight.Shape().Size()/weight.Shape().Dimensions[0])
	partial := Dot(x, weight).WithOutputDType(dtypes.Float32).General([]int{2}, []int{0}, []int{1}, []int{0})
	partial = SliceAxis(partial, 1, AxisRange(0, rows))
	return ConvertDType(ReduceSum(partial, 0), x.DType())
}

// minMatMulMACs is the smallest product (rows × in × out multiply-adds) that GoMLX's pure-Go
// backend (compute v0.1.14) sends to its packing "large" kernel, which splits one product
// over the cores; below it a product runs on a "small" kernel that reads a single row's
// weight at about 1 GB/s against the large kernel's 12 (BenchmarkMatVec). The router's
// threshold is internal, so padRows pads the rows of a product up to it.
var minMatMulMACs = 4 << 20

// maxPadRows bounds the padding: products that would need more rows are small enough (tiny
// test models) to run as they are.
const maxPadRows = 16

// padRows appends zero rows to x along axis so that rows × weightSize reaches minMatMulMACs,
// where that takes at most maxPadRows rows. The padded rows' results are sliced off by the
// caller; the real rows' results do not depend on them.
func padRows(x *Node, axis, weightSize int) *Node {
	rows := x.Shape().Dimensions[axis]
	want := ceilDiv(minMatMulMACs, weightSize)
	if rows >= want || want > maxPadRows {
		return x
	}
	dims := slices.Clone(x.Shape().Dimensions)
	dims[axis] = want - rows
	return Concatenate([]*Node{x, Zeros(x.Graph(), shapes.Make(x.DType(), dims...))}, axis)
}

// dotLastAxes contracts the last axis of lhs with the last axis of rhs, with the first
// numBatch axes of both as batch axes (q·kᵀ, hidden·embed_tokensᵀ).
//
// GoMLX v0.28.2's pure-Go DotGeneral returned wrong numbers for bfloat16 and float16 operands
// in this layout (rhs contracted on its last axis) on an Intel AVX-512 machine, so
// half-precision operands are multiplied in float32 and rounded back, which is also what a
// GPU's float32 accumulator does. TestHalfDotLastAxes logs whether the backend's own product
// is right on the CPU it runs on (it is on AMD Zen 5 with compute v0.1.14); the upcast stays
// until it is shown right on Intel too.
func dotLastAxes(lhs, rhs *Node, numBatch int) *Node {
	batch := make([]int, numBatch)
	for i := range batch {
		batch[i] = i
	}
	dtype := lhs.DType()
	if dtype == dtypes.Float32 {
		return DotGeneral(lhs, []int{lhs.Rank() - 1}, batch, rhs, []int{rhs.Rank() - 1}, batch)
	}
	out := DotGeneral(ConvertDType(lhs, dtypes.Float32), []int{lhs.Rank() - 1}, batch,
		ConvertDType(rhs, dtypes.Float32), []int{rhs.Rank() - 1}, batch)
	return ConvertDType(out, dtype)
}

// mlp is Qwen3MLP: down_proj(silu(gate_proj(x)) * up_proj(x)), block by block of the
// hidden units.
func mlp(x *Node, layer layerNodes) *Node {
	gate := columnParallel(x, layer.gateProj) // [blocks, S, ff/blocks]
	up := columnParallel(x, layer.upProj)
	return rowParallel(Mul(Mul(gate, Sigmoid(gate)), up), layer.downProj)
}

// rotaryEmbedding is Qwen3RotaryEmbedding: inv_freq = 1 / base^(2i/d) in float32 (computed on
// the host exactly as torch does), freqs = position × inv_freq in float32, then cos and sin.
// It returns the half-width tables [S, headDim/2]; applyRotary lays them out per pairing.
func (m *Model) rotaryEmbedding(positions *Node) (cos, sin *Node) {
	return rotaryTables(positions, m.Config.HeadWidth(), m.Config.Base())
}

// rotaryTables are cos and sin of the angles position × InvFreq(headDim, base) in float32, [S, headDim/2].
func rotaryTables(positions *Node, headDim int, base float64) (cos, sin *Node) {
	g := positions.Graph()
	invFreq := Const(g, InvFreq(headDim, base)) // [headDim/2]
	freqs := Mul(InsertAxes(ConvertDType(positions, dtypes.Float32), -1), InsertAxes(invFreq, 0))
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

// applyRotary rotates x [..., S, heads, headDim] by the angles of cos/sin [S, headDim/2].
// Split pairing (rope_split, Hugging Face's rotate_half): channel i rotates with i+headDim/2.
// Neighbour pairing (classic octlm): channel 2i rotates with 2i+1.
func applyRotary(x, cos, sin *Node, split bool) *Node {
	dtype := x.DType()
	headDim := x.Shape().Dimensions[x.Rank()-1]
	half := headDim / 2
	// cos/sin broadcast over heads (and any leading axes): [..., S, 1, half].
	cos = ConvertDType(InsertAxes(cos, 1), dtype)
	sin = ConvertDType(InsertAxes(sin, 1), dtype)
	for cos.Rank() < x.Rank() {
		cos, sin = InsertAxes(cos, 0), InsertAxes(sin, 0)
	}
	if split {
		// emb = cat(freqs, freqs); q_embed = q*cos + rotate_half(q)*sin,
		// rotate_half(x) = cat(-x[..., half:], x[..., :half]).
		x1 := SliceAxis(x, -1, AxisRange(0, half))
		x2 := SliceAxis(x, -1, AxisRange(half, headDim))
		cosFull := Concatenate([]*Node{cos, cos}, -1)
		sinFull := Concatenate([]*Node{sin, sin}, -1)
		rotated := Concatenate([]*Node{Neg(x2), x1}, -1)
		return Add(Mul(x, cosFull), Mul(rotated, sinFull))
	}
	dims := x.Shape().Dimensions
	pairs := Reshape(x, append(append([]int{}, dims[:len(dims)-1]...), half, 2)...)
	even := Reshape(SliceAxis(pairs, -1, AxisRange(0, 1)), append(append([]int{}, dims[:len(dims)-1]...), half)...)
	odd := Reshape(SliceAxis(pairs, -1, AxisRange(1, 2)), append(append([]int{}, dims[:len(dims)-1]...), half)...)
	outEven := Sub(Mul(even, cos), Mul(odd, sin))
	outOdd := Add(Mul(odd, cos), Mul(even, sin))
	return Reshape(Stack([]*Node{outEven, outOdd}, -1), dims...)
}

// attention is Qwen3Attention with a KV cache. x: [S, d]. It writes this chunk's keys and
// values into the caches (zeroed slots, so a scatter-add writes them; padding rows add zeros)
// and attends over the first Lb slots with the causal mask. Returns o_proj's output and the
// updated caches.
//
// The heads come in blocks (see columnParallel): block b holds kv heads b·kvPer … and the
// query heads that share them, so q, k and v are [blocks, S, heads in the block, headDim].
func (m *Model) attention(x *Node, layer layerNodes, cos, sin, causal, kCache, vCache, start, real *Node) (out, newK, newV *Node) {
	c := m.Config
	g := x.Graph()
	seqLen := x.Shape().Dimensions[0]
	heads, kvHeads, headDim := c.NHeads, c.KVHeads, c.HeadWidth()
	group := heads / kvHeads
	blocks := layer.qProj.Shape().Dimensions[0]
	kvPer := kvHeads / blocks // kv heads per block
	capacity := kCache.Shape().Dimensions[1]
	attendLen := causal.Shape().Dimensions[1]

	q := Reshape(columnParallel(x, layer.qProj), blocks, seqLen, kvPer*group, headDim)
	k := Reshape(columnParallel(x, layer.kProj), blocks, seqLen, kvPer, headDim)
	v := Reshape(columnParallel(x, layer.vProj), blocks, seqLen, kvPer, headDim)
	if c.QKNorm {
		q = rmsNorm(q, layer.qNorm, c.Eps())
		k = rmsNorm(k, layer.kNorm, c.Eps())
	}
	q = applyRotary(q, cos, sin, c.RopeSplit)
	k = applyRotary(k, cos, sin, c.RopeSplit)

	// Write k and v at cache slots start..start+S-1 of every kv head; padding rows write zeros.
	// The cache holds the activations' dtype (see cacheDType) or a narrower one (a bfloat16
	// cache under float32 activations: keys and values are rounded).
	dtype := k.DType()
	keep := ConvertDType(Reshape(real, 1, seqLen, 1, 1), dtype)
	perHead := func(t *Node) *Node { // [blocks, S, kvPer, headDim] -> [kvHeads, S, headDim]
		return Reshape(TransposeAllAxes(Mul(t, keep), 0, 2, 1, 3), kvHeads, seqLen, headDim)
	}
	k = ConvertDType(perHead(k), kCache.DType())
	v = ConvertDType(perHead(v), vCache.DType())
	headIdx := Iota(g, shapesOf(dtypes.Int32, kvHeads, seqLen, 1), 0)
	slotIdx := BroadcastToDims(Reshape(Add(start, Iota(g, shapesOf(dtypes.Int32, seqLen), 0)), 1, seqLen, 1), kvHeads, seqLen, 1)
	indices := Concatenate([]*Node{headIdx, slotIdx}, -1) // [kvHeads, S, 2]
	newK = ScatterSum(kCache, indices, k, true, true)
	newV = ScatterSum(vCache, indices, v, true, true)

	// Attend over the first Lb slots.
	keys, values := newK, newV
	if attendLen < capacity {
		keys = SliceAxis(newK, 1, AxisRange(0, attendLen))
		values = SliceAxis(newV, 1, AxisRange(0, attendLen))
	}
	keys, values = ConvertDType(keys, dtype), ConvertDType(values, dtype)
	// Grouped-query attention without copying K/V per query head: query head h uses kv head
	// h / group, so q is laid out [kvHeads, group, S, headDim] and kv heads are the batch axis.
	q = Reshape(q, blocks, seqLen, kvPer, group, headDim)
	q = TransposeAllAxes(q, 0, 2, 3, 1, 4) // [blocks, kvPer, group, S, headDim]
	q = Reshape(q, kvHeads, group, seqLen, headDim)
	// The causal mask as a bias added to the scores: 0 where attended, -inf elsewhere (x + 0 is
	// x exactly), [1, 1, S, Lb], broadcast over heads.
	bias := Where(causal, BroadcastToDims(ScalarZero(g, dtypes.Float32), seqLen, attendLen),
		BroadcastToDims(Infinity(g, dtypes.Float32, -1), seqLen, attendLen))
	bias = Reshape(bias, 1, 1, seqLen, attendLen)
	scores := dotLastAxes(Reshape(q, kvHeads, group*seqLen, headDim), keys, 1) // [kvHeads, group·S, Lb]
	scores = MulScalar(scores, 1/math.Sqrt(float64(headDim)))
	scores = Add(Reshape(ConvertDType(scores, dtypes.Float32), kvHeads, group, seqLen, attendLen), bias)
	probs := ConvertDType(Reshape(Softmax(scores, -1), kvHeads, group*seqLen, attendLen), values.DType())
	ctx := DotGeneral(probs, []int{2}, []int{0}, values, []int{1}, []int{0}) // [kvHeads, group·S, headDim]
	ctx = Reshape(ctx, blocks, kvPer, group, seqLen, headDim)
	ctx = TransposeAllAxes(ctx, 0, 3, 1, 2, 4) // [blocks, S, kvPer, group, headDim]
	ctx = Reshape(ctx, blocks, seqLen, kvPer*group*headDim)
	return rowParallel(ctx, layer.oProj), newK, newV
}

func shapesOf(dtype dtypes.DType, dims ...int) shapes.Shape { return shapes.Make(dtype, dims...) }
