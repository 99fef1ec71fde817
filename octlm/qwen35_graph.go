package octlm

// Qwen3.5's decoder as one GoMLX graph, written to be read beside transformers'
// models/qwen3_5/modeling_qwen3_5.py: the names (input_layernorm, linear_attn, in_proj_qkv,
// conv1d, A_log, dt_bias, self_attn, q_proj, q_norm, rotate_half, o_proj, mlp, norm) are theirs.
//
// One step graph serves the full and the cached paths, as the Qwen3 graph does: a chunk of S
// token IDs (padded; only the first `valid` are real) starting at position `start`, on top of
// a cache holding, per full-attention layer, keys and values [kvHeads, capacity, headDim] and,
// per Gated DeltaNet layer, the convolution state [kernel−1, convDim] (the last kernel−1 real
// inputs of the convolution) and the recurrent state [valueHeads, keyDim, valueDim] in float32.
// Padding rows leave the DeltaNet states unchanged: their β and g are 0, so they write nothing
// and decay nothing, and the convolution state is cut at the last real row.

import (
	"math"

	"github.com/gomlx/compute/dtypes"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // the graph DSL reads best unqualified
)

// q35Layer is one layer's weights inside a graph; the fields of the other layer type are nil.
type q35Layer struct {
	full                                   bool
	inputLayernorm, postAttentionLayernorm *Node
	gateProj, upProj, downProj             *Node
	// self_attn
	qProj, kProj, vProj, oProj, qNorm, kNorm *Node
	// linear_attn
	inProjQKV, inProjZ, inProjB, inProjA, conv1d, aLog, dtBias, norm, outProj *Node
}

type q35Weights struct {
	embed, norm, lmHead *Node
	layers              []q35Layer
}

// unflatten names the weight inputs in qwen35WeightSpecs' order.
func (m *Qwen35Model) unflatten(nodes []*Node) q35Weights {
	i := 0
	next := func() *Node { i++; return nodes[i-1] }
	w := q35Weights{embed: next(), norm: next()}
	w.lmHead = w.embed
	if !m.Config.Tied {
		w.lmHead = next()
	}
	for _, t := range m.Config.LayerTypes {
		l := q35Layer{full: t == FullAttention}
		l.inputLayernorm, l.postAttentionLayernorm = next(), next()
		l.gateProj, l.upProj, l.downProj = next(), next(), next()
		if l.full {
			l.qProj, l.kProj, l.vProj, l.oProj, l.qNorm, l.kNorm = next(), next(), next(), next(), next(), next()
		} else {
			l.inProjQKV, l.inProjZ, l.inProjB, l.inProjA = next(), next(), next(), next()
			l.conv1d, l.aLog, l.dtBias, l.norm, l.outProj = next(), next(), next(), next(), next()
		}
		w.layers = append(w.layers, l)
	}
	return w
}

// q35StepGraph builds the step. inputs: the step inputs (inIDs … inLogitRows, as Qwen3's),
// then the weights, then the cache states (two per layer, see the file comment). Outputs:
// logits [P, vocab] float32, the updated states in the same order, and with tracing on the
// hidden state [S, hidden] after the embedding and after every layer (float32).
func (m *Qwen35Model) q35StepGraph(g *Graph, inputs []*Node, trace bool) []*Node {
	c := m.Config
	ids, start, valid := inputs[inIDs], inputs[inStart], inputs[inValid]
	keyPos, logitRows := inputs[inKeyPos], inputs[inLogitRows]
	nw := len(m.specs)
	w := m.unflatten(inputs[numStepInputs : numStepInputs+nw])
	states := inputs[numStepInputs+nw:]

	offsets := Iota(g, ids.Shape(), 0)
	positions := Add(start, offsets)
	real := LessThan(offsets, valid) // [S] bool
	cos, sin := rotaryTables(positions, c.RotaryDim, c.RopeTheta)
	causal := LessOrEqual(InsertAxes(keyPos, 0), InsertAxes(positions, -1)) // [S, Lb]

	// embed_tokens, stored as columns [hidden, vocab] or rows [vocab, hidden].
	table, head := w.embed, w.lmHead
	if !m.embedColumns {
		table = Reshape(table, 1, c.VocabSize, c.Hidden)
		head = Reshape(head, 1, c.VocabSize, c.Hidden)
	}
	hidden := embed(table, ids, m.embedSlices) // [S, hidden]
	var traced []*Node
	if trace {
		traced = append(traced, ConvertDType(hidden, dtypes.Float32))
	}

	newStates := make([]*Node, 0, len(states))
	for i, layer := range w.layers {
		residual := hidden
		x := zeroCenteredRMSNorm(hidden, layer.inputLayernorm, c.NormEps)
		var mixed, s0, s1 *Node
		if layer.full {
			mixed, s0, s1 = m.q35Attention(x, layer, cos, sin, causal, states[2*i], states[2*i+1], start, real)
		} else {
			mixed, s0, s1 = m.gatedDeltaNet(x, layer, states[2*i], states[2*i+1], valid, real)
		}
		newStates = append(newStates, s0, s1)
		hidden = Add(residual, mixed)

		residual = hidden
		x = zeroCenteredRMSNorm(hidden, layer.postAttentionLayernorm, c.NormEps)
		hidden = Add(residual, q35MLP(x, layer))
		if trace {
			traced = append(traced, ConvertDType(hidden, dtypes.Float32))
		}
	}

	hidden = Gather(hidden, InsertAxes(logitRows, -1)) // [P, hidden]
	hidden = zeroCenteredRMSNorm(hidden, w.norm, c.NormEps)
	logits := ConvertDType(lmHead(hidden, head, c.VocabSize), dtypes.Float32) // [P, vocab]
	out := append([]*Node{logits}, newStates...)
	return append(out, traced...)
}

// linear is nn.Linear without bias on x [..., in], the weight stored transposed [in, out]:
// a plain x·W, its rows padded so that the pure-Go backend spreads the product over the cores
// (see padRows).
func linear(x, weight *Node) *Node {
	lead := x.Shape().Dimensions[:x.Rank()-1]
	in, out := weight.Shape().Dimensions[0], weight.Shape().Dimensions[1]
	rows := 1
	for _, d := range lead {
		rows *= d
	}
	x2 := padRows(Reshape(x, rows, in), 0, weight.Shape().Size())
	y := DotGeneral(x2, []int{1}, nil, weight, []int{0}, nil)
	if y.Shape().Dimensions[0] != rows {
		y = SliceAxis(y, 0, AxisRange(0, rows))
	}
	return Reshape(y, append(append([]int{}, lead...), out)...)
}

// zeroCenteredRMSNorm is Qwen3_5RMSNorm: x · rsqrt(mean(x²) + eps) · (1 + w), in float32, the
// stored weight zero-centred.
func zeroCenteredRMSNorm(x, weight *Node, eps float64) *Node {
	dtype := x.DType()
	x32 := ConvertDType(x, dtypes.Float32)
	variance := ReduceAndKeep(Square(x32), ReduceMean, -1)
	x32 = divSqrt(x32, AddScalar(variance, eps))
	w := OnePlus(ConvertDType(weight, dtypes.Float32))
	for w.Rank() < x32.Rank() {
		w = InsertAxes(w, 0)
	}
	return ConvertDType(Mul(x32, w), dtype)
}

// rmsNormGated is Qwen3_5RMSNormGated: (x · rsqrt(mean(x²) + eps)) · w · silu(z), with the
// plain weight w; x and z [..., headDim].
func rmsNormGated(x, z, weight *Node, eps float64) *Node {
	dtype := x.DType()
	x32 := ConvertDType(x, dtypes.Float32)
	variance := ReduceAndKeep(Square(x32), ReduceMean, -1)
	x32 = divSqrt(x32, AddScalar(variance, eps))
	w := ConvertDType(weight, dtypes.Float32)
	for w.Rank() < x32.Rank() {
		w = InsertAxes(w, 0)
	}
	z32 := ConvertDType(z, dtypes.Float32)
	return ConvertDType(Mul(Mul(w, x32), Mul(z32, Sigmoid(z32))), dtype)
}

// q35MLP is Qwen3_5MLP: down_proj(silu(gate_proj(x)) · up_proj(x)).
func q35MLP(x *Node, layer q35Layer) *Node {
	gate := linear(x, layer.gateProj)
	return linear(Mul(Mul(gate, Sigmoid(gate)), linear(x, layer.upProj)), layer.downProj)
}

// q35Attention is Qwen3_5Attention with a KV cache: q_proj gives a query and an output gate per
// head; q_norm and k_norm; RoPE on the first RotaryDim dims of each head (rotate_half pairing);
// grouped-query softmax attention over the first Lb cache slots; the output times
// sigmoid(gate); o_proj. x: [S, hidden].
func (m *Qwen35Model) q35Attention(x *Node, l q35Layer, cos, sin, causal, kCache, vCache, start, real *Node) (out, newK, newV *Node) {
	c := m.Config
	g := x.Graph()
	seqLen := x.Shape().Dimensions[0]
	heads, kvHeads, hd := c.Heads, c.KVHeads, c.HeadDim
	group := heads / kvHeads
	attendLen := causal.Shape().Dimensions[1]

	qg := Reshape(linear(x, l.qProj), seqLen, heads, 2*hd) // per head: query | gate
	q := SliceAxis(qg, -1, AxisRange(0, hd))
	gate := Reshape(SliceAxis(qg, -1, AxisRange(hd, 2*hd)), seqLen, heads*hd)
	q = zeroCenteredRMSNorm(q, l.qNorm, c.NormEps)
	k := zeroCenteredRMSNorm(Reshape(linear(x, l.kProj), seqLen, kvHeads, hd), l.kNorm, c.NormEps)
	v := Reshape(linear(x, l.vProj), seqLen, kvHeads, hd)
	q = partialRotary(q, cos, sin, c.RotaryDim)
	k = partialRotary(k, cos, sin, c.RotaryDim)

	// Write this chunk's keys and values at slots start…start+S−1 by adding into the zeroed
	// slots; padding rows add zeros, so the slots past the real length stay zero.
	keep := ConvertDType(Reshape(real, seqLen, 1, 1), k.DType())
	headIdx := Iota(g, shapesOf(dtypes.Int32, kvHeads, seqLen, 1), 0)
	slotIdx := BroadcastToDims(Reshape(Add(start, Iota(g, shapesOf(dtypes.Int32, seqLen), 0)), 1, seqLen, 1), kvHeads, seqLen, 1)
	indices := Concatenate([]*Node{headIdx, slotIdx}, -1) // [kvHeads, S, 2]
	toCache := func(t, cache *Node) *Node {
		t = ConvertDType(TransposeAllAxes(Mul(t, keep), 1, 0, 2), cache.DType()) // [kvHeads, S, hd]
		return ScatterSum(cache, indices, t, true, true)
	}
	newK, newV = toCache(k, kCache), toCache(v, vCache)
	keys := ConvertDType(SliceAxis(newK, 1, AxisRange(0, attendLen)), q.DType())
	values := ConvertDType(SliceAxis(newV, 1, AxisRange(0, attendLen)), q.DType())

	// Query head h uses kv head h / group: q as [kvHeads, group·S, hd], kv heads the batch axis.
	q = TransposeAllAxes(Reshape(q, seqLen, kvHeads, group, hd), 1, 2, 0, 3)
	q = Reshape(q, kvHeads, group*seqLen, hd)
	scores := ConvertDType(dotLastAxes(q, keys, 1), dtypes.Float32) // [kvHeads, group·S, Lb]
	scores = MulScalar(scores, 1/math.Sqrt(float64(hd)))
	bias := Where(causal, BroadcastToDims(ScalarZero(g, dtypes.Float32), seqLen, attendLen),
		BroadcastToDims(Infinity(g, dtypes.Float32, -1), seqLen, attendLen))
	scores = Add(Reshape(scores, kvHeads, group, seqLen, attendLen), Reshape(bias, 1, 1, seqLen, attendLen))
	probs := ConvertDType(Reshape(Softmax(scores, -1), kvHeads, group*seqLen, attendLen), values.DType())
	ctx := DotGeneral(probs, []int{2}, []int{0}, values, []int{1}, []int{0}) // [kvHeads, group·S, hd]
	ctx = TransposeAllAxes(Reshape(ctx, kvHeads, group, seqLen, hd), 2, 0, 1, 3)
	ctx = Reshape(ctx, seqLen, heads*hd)
	ctx = Mul(ctx, Sigmoid(gate))
	return linear(ctx, l.oProj), newK, newV
}

// partialRotary is apply_rotary_pos_emb with a partial rotary factor: the first rotaryDim
// dims of each head rotate (rotate_half pairing within them), the rest pass through.
// x: [S, heads, headDim]; cos, sin: [S, rotaryDim/2].
func partialRotary(x, cos, sin *Node, rotaryDim int) *Node {
	headDim := x.Shape().Dimensions[x.Rank()-1]
	rot := applyRotary(SliceAxis(x, -1, AxisRange(0, rotaryDim)), cos, sin, true)
	if rotaryDim == headDim {
		return rot
	}
	return Concatenate([]*Node{rot, SliceAxis(x, -1, AxisRange(rotaryDim, headDim))}, -1)
}

// gatedDeltaNet is Qwen3_5GatedDeltaNet on a chunk x [S, hidden] on top of its states: the
// convolution state [kernel−1, convDim] and the recurrent state [valueHeads, keyDim, valueDim].
func (m *Qwen35Model) gatedDeltaNet(x *Node, l q35Layer, convState, recState, valid, real *Node) (out, newConv, newRec *Node) {
	c := m.Config
	g := x.Graph()
	seqLen := x.Shape().Dimensions[0]
	kh, vh, dk, dv := c.LinKeyHeads, c.LinValueHeads, c.LinKeyDim, c.LinValueDim
	f32 := dtypes.Float32

	mixedQKV := ConvertDType(linear(x, l.inProjQKV), f32) // [S, convDim]
	z := Reshape(linear(x, l.inProjZ), seqLen, vh, dv)
	b := ConvertDType(linear(x, l.inProjB), f32) // [S, vh]
	a := ConvertDType(linear(x, l.inProjA), f32)

	// conv1d: causal depthwise convolution over time, kernel K, the previous K−1 inputs from
	// the state (zeros at the start), then SiLU. out[t] = Σ_j w[j] · in[t + j].
	kernel := c.ConvKernel
	in := Concatenate([]*Node{convState, mixedQKV}, 0) // [K−1+S, convDim]
	weight := Reshape(ConvertDType(l.conv1d, f32), c.ConvDim(), kernel)
	var conv *Node
	for j := range kernel {
		term := Mul(SliceAxis(in, 0, AxisRange(j, j+seqLen)), Reshape(SliceAxis(weight, 1, AxisElem(j)), 1, c.ConvDim()))
		if conv == nil {
			conv = term
		} else {
			conv = Add(conv, term)
		}
	}
	conv = Mul(conv, Sigmoid(conv))
	// The new state is the last K−1 real inputs: rows valid … valid+K−2 of in.
	rows := Add(valid, Iota(g, shapesOf(dtypes.Int32, kernel-1), 0))
	newConv = Gather(in, InsertAxes(rows, -1)) // [K−1, convDim]

	q := Reshape(SliceAxis(conv, 1, AxisRange(0, c.KeyDim())), seqLen, kh, dk)
	k := Reshape(SliceAxis(conv, 1, AxisRange(c.KeyDim(), 2*c.KeyDim())), seqLen, kh, dk)
	v := Reshape(SliceAxis(conv, 1, AxisRange(2*c.KeyDim(), c.ConvDim())), seqLen, vh, dv)

	// β = sigmoid(b), g = −exp(A_log) · softplus(a + dt_bias); 0 on padding rows.
	beta := Sigmoid(b)
	aLog := InsertAxes(ConvertDType(l.aLog, f32), 0)
	dtBias := InsertAxes(ConvertDType(l.dtBias, f32), 0)
	decay := Mul(Neg(Exp(aLog)), softplus(Add(a, dtBias)))
	mask := BroadcastToDims(InsertAxes(real, -1), seqLen, vh)
	beta = Where(mask, beta, ZerosLike(beta))
	decay = Where(mask, decay, ZerosLike(decay))

	// l2norm with eps 1e-6 inside the root, then q scaled by 1/√dk.
	q = MulScalar(l2norm(q), 1/math.Sqrt(float64(dk)))
	k = l2norm(k)
	// Value head h reads key head h / (vh/kh): repeat_interleave on the head axis.
	if r := vh / kh; r > 1 {
		q = Reshape(BroadcastToDims(InsertAxes(q, 2), seqLen, kh, r, dk), seqLen, vh, dk)
		k = Reshape(BroadcastToDims(InsertAxes(k, 2), seqLen, kh, r, dk), seqLen, vh, dk)
	}

	o, newRec := chunkGatedDeltaRule(q, k, v, beta, decay, recState, deltaChunk(seqLen))
	o = rmsNormGated(o, z, l.norm, c.NormEps) // [S, vh, dv]
	o = ConvertDType(Reshape(o, seqLen, vh*dv), x.DType())
	return linear(o, l.outProj), newConv, newRec
}

// softplus is log(1 + exp(x)) computed as max(x, 0) + log1p(exp(−|x|)).
func softplus(x *Node) *Node {
	return Add(Max(x, ZerosLike(x)), Log1p(Exp(Neg(Abs(x)))))
}

// l2norm is transformers' l2norm: x · rsqrt(Σx² + 1e-6) over the last axis.
func l2norm(x *Node) *Node {
	return divSqrt(x, AddScalar(ReduceAndKeep(Square(x), ReduceSum, -1), 1e-6))
}

// maxDeltaChunk is the chunk length of the parallel delta rule. transformers uses 64; in
// float32 the chunked form loses digits as the chunk grows (the corrected values are
// differences of terms that grow with the chunk's products of keys), and 16 measured best:
// worst logit error over every case of tiny-qwen35 / -sharded / -wide against the float64
// reference, chunks of 64: 7.9e-4 / 1.7e-4 / 1.7e-4; 32: 5.5e-4 / 1.9e-4 / 1.6e-4;
// 16: 3.3e-4 / 1.6e-4 / 1.6e-4; 8: 3.9e-4 / 2.7e-4 / 1.5e-4 (pure-Go backend). The same
// chunks with the inverse by block substitution instead of the nilpotent product gave the
// same numbers, so the product is not what loses them.
const maxDeltaChunk = 16

// deltaChunk is the chunk length used for a step of seqLen rows: the largest power of two up
// to maxDeltaChunk that divides it.
func deltaChunk(seqLen int) int {
	c := 1
	for c < maxDeltaChunk && seqLen%(2*c) == 0 {
		c *= 2
	}
	return c
}

// chunkGatedDeltaRule is the gated delta rule in its chunked parallel form
// (torch_chunk_gated_delta_rule), all in float32. q, k: [S, H, dk] (q already scaled); v: [S,
// H, dv]; beta, g: [S, H]; state: [H, dk, dv]; S a multiple of chunk. Per head, token by token
// it equals S ← exp(g_t)·S; S ← S + k_t·(β_t·(v_t − Sᵀk_t))ᵀ; o_t = Sᵀq_t (see
// recurrentGatedDeltaRule). Returns o [S, H, dv] and the final state.
func chunkGatedDeltaRule(q, k, v, beta, g, state *Node, chunk int) (o, final *Node) {
	seqLen, heads := q.Shape().Dimensions[0], q.Shape().Dimensions[1]
	n := seqLen / chunk
	gr := q.Graph()
	// [S, H, d] -> [H, n, C, d]
	blocks := func(x *Node) *Node {
		d := x.Shape().Dimensions[2]
		return Reshape(TransposeAllAxes(x, 1, 0, 2), heads, n, chunk, d)
	}
	q, k, v = blocks(q), blocks(k), blocks(v)
	beta = Reshape(TransposeAllAxes(beta, 1, 0), heads, n, chunk, 1)
	g = Reshape(TransposeAllAxes(g, 1, 0), heads, n, chunk)
	cum := CumSum(g, 2) // G: cumulative log decay within each chunk [H, n, C]

	kBeta, vBeta := Mul(k, beta), Mul(v, beta)
	// pairwise decay exp(G_i − G_j) for j ≤ i, 0 above the diagonal.
	lowerIncl := LowerTriangular(gr, chunk) // [C, C] j ≤ i
	strict := LogicalAnd(lowerIncl, LogicalNot(Diagonal(gr, chunk)))
	diff := Sub(InsertAxes(cum, -1), InsertAxes(cum, -2)) // [H, n, C, C]
	inclB := BroadcastToDims(Reshape(lowerIncl, 1, 1, chunk, chunk), heads, n, chunk, chunk)
	pairwise := Where(inclB, Exp(Where(inclB, diff, ZerosLike(diff))), ZerosLike(diff))
	batchDot := func(a, b *Node) *Node { // [H, n, I, K] · [H, n, K, J]
		return DotGeneral(a, []int{3}, []int{0, 1}, b, []int{2}, []int{0, 1})
	}
	kkT := DotGeneral(kBeta, []int{3}, []int{0, 1}, k, []int{3}, []int{0, 1}) // [H, n, C, C]
	attnA := Where(BroadcastToDims(Reshape(strict, 1, 1, chunk, chunk), heads, n, chunk, chunk), Mul(kkT, pairwise), ZerosLike(kkT))
	inv := unitLowerInverse(attnA, chunk)                            // (I + A)⁻¹
	newValues := batchDot(inv, vBeta)                                // [H, n, C, dv]
	kCumDecay := batchDot(inv, Mul(kBeta, InsertAxes(Exp(cum), -1))) // [H, n, C, dk]
	intra := Mul(DotGeneral(q, []int{3}, []int{0, 1}, k, []int{3}, []int{0, 1}), pairwise)

	last := SliceAxis(cum, 2, AxisElem(chunk-1)) // [H, n, 1]
	qDecayed := Mul(q, InsertAxes(Exp(cum), -1))
	kTail := Mul(k, InsertAxes(Exp(Sub(last, cum)), -1))
	chunkDecay := Exp(last) // [H, n, 1]

	outs := make([]*Node, n)
	for i := range n {
		at := func(x *Node) *Node { return Squeeze(SliceAxis(x, 1, AxisElem(i)), 1) }
		// [H, C, dk] · [H, dk, dv]
		vNew := Sub(at(newValues), DotGeneral(at(kCumDecay), []int{2}, []int{0}, state, []int{1}, []int{0}))
		inter := DotGeneral(at(qDecayed), []int{2}, []int{0}, state, []int{1}, []int{0})
		outs[i] = Add(inter, DotGeneral(at(intra), []int{2}, []int{0}, vNew, []int{1}, []int{0}))
		update := DotGeneral(at(kTail), []int{1}, []int{0}, vNew, []int{1}, []int{0}) // [H, dk, dv]
		state = Add(Mul(state, InsertAxes(at(chunkDecay), -1)), update)
	}
	o = outs[0]
	if n > 1 {
		o = Concatenate(outs, 1) // [H, S, dv]
	}
	return TransposeAllAxes(o, 1, 0, 2), state
}

// unitLowerInverse returns (I + A)⁻¹ for A [..., C, C] strictly lower triangular, C a power
// of two. A is nilpotent (A^C = 0), so (I + A)⁻¹ = Σ_{n<C} (−A)^n = Π_{j<log₂C} (I + (−A)^(2^j)):
// matrix products only, no triangular solver.
func unitLowerInverse(a *Node, chunk int) *Node {
	rank := a.Rank()
	batch := make([]int, rank-2)
	for i := range batch {
		batch[i] = i
	}
	dot := func(x, y *Node) *Node { return DotGeneral(x, []int{rank - 1}, batch, y, []int{rank - 2}, batch) }
	identity := DiagonalWithValue(ScalarOne(a.Graph(), a.DType()), chunk)
	for identity.Rank() < rank {
		identity = InsertAxes(identity, 0)
	}
	power := Neg(a)
	product := Add(identity, power)
	for p := 2; p < chunk; p *= 2 {
		power = dot(power, power)
		product = Add(product, dot(product, power))
	}
	return product
}

// recurrentGatedDeltaRule is torch_recurrent_gated_delta_rule: the delta rule token by token,
// the reference the chunked form is tested against. Shapes as chunkGatedDeltaRule's.
func recurrentGatedDeltaRule(q, k, v, beta, g, state *Node) (o, final *Node) {
	seqLen, heads := q.Shape().Dimensions[0], q.Shape().Dimensions[1]
	outs := make([]*Node, seqLen)
	for t := range seqLen {
		row := func(x *Node) *Node { return Squeeze(SliceAxis(x, 0, AxisElem(t)), 0) }
		qt, kt, vt := row(q), row(k), row(v) // [H, d]
		bt, gt := row(beta), row(g)          // [H]
		state = Mul(state, Reshape(Exp(gt), heads, 1, 1))
		kvMem := ReduceSum(Mul(state, InsertAxes(kt, -1)), 1) // Sᵀk: [H, dv]
		delta := Mul(Sub(vt, kvMem), InsertAxes(bt, -1))
		state = Add(state, Mul(InsertAxes(kt, -1), InsertAxes(delta, 1)))
		outs[t] = InsertAxes(ReduceSum(Mul(state, InsertAxes(qt, -1)), 1), 0) // [1, H, dv]
	}
	if seqLen == 1 {
		return outs[0], state
	}
	return Concatenate(outs, 0), state
}
