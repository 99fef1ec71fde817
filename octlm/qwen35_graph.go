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
	"fmt"
	"math"

	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/shapes"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // the graph DSL reads best unqualified
)

// forward is Qwen3_5TextModel.forward: embed_tokens, then the decoder layers. It returns the
// hidden state before the final norm and the new cache state.
func (q qwen35) forward(s *step, w weightSet, state []*Node) (*Node, []*Node) {
	hiddens, newState := q.layers(s, w, state)
	return hiddens[len(hiddens)-1], newState
}

// layers runs the embedding and every decoder layer and returns the hidden state after the
// embedding and after each layer (len NLayers+1; the trace compares them), and the new state.
func (q qwen35) layers(s *step, w weightSet, state []*Node) ([]*Node, []*Node) {
	c := q.c
	cos, sin := rotaryTables(s.positions, c.RotaryDim, c.RopeTheta) // Qwen3_5TextRotaryEmbedding, text positions
	p := c.WeightPrefix()
	hidden := s.ops.embed(w.get(p+"embed_tokens.weight"), s.ids) // [S, hidden]
	hiddens := []*Node{hidden}
	newState := make([]*Node, 0, len(state))
	for i, t := range c.LayerTypes {
		l := w.under(fmt.Sprintf("%slayers.%d.", p, i))
		// Token mixer with a residual connection.
		residual := hidden
		x := zeroCenteredRMSNorm(s.ops, hidden, l.get("input_layernorm.weight"), c.NormEps)
		var mixed, s0, s1 *Node
		if t == FullAttention {
			mixed, s0, s1 = q.attention(s, l.under("self_attn."), x, cos, sin, state[2*i], state[2*i+1])
		} else {
			mixed, s0, s1 = q.gatedDeltaNet(s, l.under("linear_attn."), x, state[2*i], state[2*i+1])
		}
		newState = append(newState, s0, s1)
		hidden = Add(residual, mixed)

		// Feed-forward block with a residual connection.
		residual = hidden
		x = zeroCenteredRMSNorm(s.ops, hidden, l.get("post_attention_layernorm.weight"), c.NormEps)
		hidden = Add(residual, mlp(s.ops, l.under("mlp."), x)) // Qwen3_5MLP is Qwen3MLP
		hiddens = append(hiddens, hidden)
	}
	return hiddens, newState
}

// logits is the final norm, then lm_head (embed_tokens when tied), on hidden [P, hidden].
func (q qwen35) logits(s *step, w weightSet, hidden *Node) *Node {
	p := q.c.WeightPrefix()
	hidden = zeroCenteredRMSNorm(s.ops, hidden, w.get(p+"norm.weight"), q.c.NormEps)
	head := p + "embed_tokens.weight"
	if !q.c.Tied {
		head = TiedHeadName
	}
	return s.ops.head(hidden, w.get(head))
}

// zeroCenteredRMSNorm is Qwen3_5RMSNorm: x · rsqrt(mean(x²) + eps) · (1 + w), in float32, the
// stored weight zero-centred.
func zeroCenteredRMSNorm(o ops, x, weight *Node, eps float64) *Node {
	dtype := x.DType()
	x32 := rmsNormalized(o, x, eps)
	w := OnePlus(ConvertDType(weight, dtypes.Float32))
	for w.Rank() < x32.Rank() {
		w = InsertAxes(w, 0)
	}
	return ConvertDType(Mul(x32, w), dtype)
}

// rmsNormGated is Qwen3_5RMSNormGated: (x · rsqrt(mean(x²) + eps)) · w · silu(z), with the
// plain weight w; x and z [..., headDim].
func rmsNormGated(o ops, x, z, weight *Node, eps float64) *Node {
	dtype := x.DType()
	x32 := rmsNormalized(o, x, eps)
	w := ConvertDType(weight, dtypes.Float32)
	for w.Rank() < x32.Rank() {
		w = InsertAxes(w, 0)
	}
	z32 := ConvertDType(z, dtypes.Float32)
	return ConvertDType(Mul(Mul(w, x32), o.silu(z32)), dtype)
}

// q35Attention is Qwen3_5Attention with a KV cache: q_proj gives a query and an output gate per
// head; q_norm and k_norm; RoPE on the first RotaryDim dims of each head (rotate_half pairing);
// grouped-query softmax attention over the first Lb cache slots; the output times
// sigmoid(gate); o_proj. x: [S, hidden].
func (q qwen35) attention(s *step, w weightSet, x, cos, sin, kCache, vCache *Node) (out, newK, newV *Node) {
	c := q.c
	g := x.Graph()
	o, causal, start, real := s.ops, s.causal, s.start, s.real
	seqLen := x.Shape().Dimensions[0]
	heads, kvHeads, hd := c.Heads, c.KVHeads, c.HeadDim
	group := heads / kvHeads
	attendLen := causal.Shape().Dimensions[1]

	qkv := o.projections(x, w, "q_proj.weight", "k_proj.weight", "v_proj.weight")
	qg := Reshape(qkv[0], seqLen, heads, 2*hd) // per head: query | gate
	query := SliceAxis(qg, -1, AxisRange(0, hd))
	gate := Reshape(SliceAxis(qg, -1, AxisRange(hd, 2*hd)), seqLen, heads*hd)
	query = zeroCenteredRMSNorm(o, query, w.get("q_norm.weight"), c.NormEps)
	k := zeroCenteredRMSNorm(o, Reshape(qkv[1], seqLen, kvHeads, hd), w.get("k_norm.weight"), c.NormEps)
	v := Reshape(qkv[2], seqLen, kvHeads, hd)
	query = partialRotary(query, cos, sin, c.RotaryDim)
	k = partialRotary(k, cos, sin, c.RotaryDim)

	// Write this chunk's keys and values at slots start…start+S−1 of the zeroed cache (see
	// ops.writeCache); padding rows write zeros, so the slots past the real length stay zero.
	keep := ConvertDType(Reshape(real, seqLen, 1, 1), k.DType())
	toCache := func(t, cache *Node) *Node {
		t = ConvertDType(TransposeAllAxes(Mul(t, keep), 1, 0, 2), cache.DType()) // [kvHeads, S, hd]
		return o.writeCache(cache, t, start)
	}
	newK, newV = toCache(k, kCache), toCache(v, vCache)
	keys := ConvertDType(SliceAxis(newK, 1, AxisRange(0, attendLen)), query.DType())
	values := ConvertDType(SliceAxis(newV, 1, AxisRange(0, attendLen)), query.DType())

	// Query head h uses kv head h / group: query as [kvHeads, group·S, hd], kv heads the batch axis.
	query = TransposeAllAxes(Reshape(query, seqLen, kvHeads, group, hd), 1, 2, 0, 3)
	query = Reshape(query, kvHeads, group*seqLen, hd)
	scores := ConvertDType(o.dotLastAxes(query, keys, 1), dtypes.Float32) // [kvHeads, group·S, Lb]
	scores = MulScalar(scores, 1/math.Sqrt(float64(hd)))
	bias := Where(causal, BroadcastToDims(ScalarZero(g, dtypes.Float32), seqLen, attendLen),
		BroadcastToDims(Infinity(g, dtypes.Float32, -1), seqLen, attendLen))
	scores = Add(Reshape(scores, kvHeads, group, seqLen, attendLen), Reshape(bias, 1, 1, seqLen, attendLen))
	probs := ConvertDType(Reshape(Softmax(scores, -1), kvHeads, group*seqLen, attendLen), values.DType())
	ctx := DotGeneral(probs, []int{2}, []int{0}, values, []int{1}, []int{0}) // [kvHeads, group·S, hd]
	ctx = TransposeAllAxes(Reshape(ctx, kvHeads, group, seqLen, hd), 2, 0, 1, 3)
	ctx = Reshape(ctx, seqLen, heads*hd)
	ctx = Mul(ctx, o.sigmoid(gate))
	return o.linear(ctx, w.get("o_proj.weight")), newK, newV
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
func (q qwen35) gatedDeltaNet(s *step, w weightSet, x, convState, recState *Node) (out, newConv, newRec *Node) {
	c := q.c
	g := x.Graph()
	o, valid, real := s.ops, s.valid, s.real
	seqLen := x.Shape().Dimensions[0]
	kh, vh, dk, dv := c.LinKeyHeads, c.LinValueHeads, c.LinKeyDim, c.LinValueDim
	f32 := dtypes.Float32

	proj := o.projections(x, w, "in_proj_qkv.weight", "in_proj_z.weight", "in_proj_b.weight", "in_proj_a.weight")
	mixedQKV := ConvertDType(proj[0], f32) // [S, convDim]
	z := Reshape(proj[1], seqLen, vh, dv)
	b := ConvertDType(proj[2], f32) // [S, vh]
	a := ConvertDType(proj[3], f32)

	// conv1d: causal depthwise convolution over time, kernel K, the previous K−1 inputs from
	// the state (zeros at the start), then SiLU. out[t] = Σ_j w[j] · in[t + j].
	kernel := c.ConvKernel
	in := Concatenate([]*Node{convState, mixedQKV}, 0) // [K−1+S, convDim]
	weight := Reshape(ConvertDType(w.get("conv1d.weight"), f32), c.ConvDim(), kernel)
	var conv *Node
	for j := range kernel {
		term := Mul(SliceAxis(in, 0, AxisRange(j, j+seqLen)), Reshape(SliceAxis(weight, 1, AxisElem(j)), 1, c.ConvDim()))
		if conv == nil {
			conv = term
		} else {
			conv = Add(conv, term)
		}
	}
	conv = o.silu(conv)
	// The new state is the last K−1 real inputs: rows valid … valid+K−2 of in.
	rows := Add(valid, Iota(g, shapes.Make(dtypes.Int32, kernel-1), 0))
	newConv = Gather(in, InsertAxes(rows, -1)) // [K−1, convDim]

	qh := Reshape(SliceAxis(conv, 1, AxisRange(0, c.KeyDim())), seqLen, kh, dk)
	k := Reshape(SliceAxis(conv, 1, AxisRange(c.KeyDim(), 2*c.KeyDim())), seqLen, kh, dk)
	v := Reshape(SliceAxis(conv, 1, AxisRange(2*c.KeyDim(), c.ConvDim())), seqLen, vh, dv)

	// β = sigmoid(b), g = −exp(A_log) · softplus(a + dt_bias); 0 on padding rows.
	beta := o.sigmoid(b)
	aLog := InsertAxes(ConvertDType(w.get("A_log"), f32), 0)
	dtBias := InsertAxes(ConvertDType(w.get("dt_bias"), f32), 0)
	decay := Mul(Neg(Exp(aLog)), softplus(Add(a, dtBias)))
	mask := BroadcastToDims(InsertAxes(real, -1), seqLen, vh)
	beta = Where(mask, beta, ZerosLike(beta))
	decay = Where(mask, decay, ZerosLike(decay))

	// l2norm with eps 1e-6 inside the root, then q scaled by 1/√dk.
	query := MulScalar(l2norm(o, qh), 1/math.Sqrt(float64(dk)))
	k = l2norm(o, k)
	// Value head h reads key head h / (vh/kh): repeat_interleave on the head axis.
	if r := vh / kh; r > 1 {
		query = Reshape(BroadcastToDims(InsertAxes(query, 2), seqLen, kh, r, dk), seqLen, vh, dk)
		k = Reshape(BroadcastToDims(InsertAxes(k, 2), seqLen, kh, r, dk), seqLen, vh, dk)
	}

	core, newRec := chunkGatedDeltaRule(query, k, v, beta, decay, recState, deltaChunk(seqLen))
	core = rmsNormGated(o, core, z, w.get("norm.weight"), c.NormEps) // [S, vh, dv]
	core = ConvertDType(Reshape(core, seqLen, vh*dv), x.DType())
	return o.linear(core, w.get("out_proj.weight")), newConv, newRec
}

// softplus is log(1 + exp(x)) computed as max(x, 0) + log1p(exp(−|x|)).
func softplus(x *Node) *Node {
	return Add(Max(x, ZerosLike(x)), Log1p(Exp(Neg(Abs(x)))))
}

// l2norm is transformers' l2norm: x · rsqrt(Σx² + 1e-6) over the last axis.
func l2norm(o ops, x *Node) *Node {
	return o.rsqrtMul(x, AddScalar(ReduceAndKeep(Square(x), ReduceSum, -1), 1e-6))
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
