package octlm

// Qwen3.5's decoder as one GoMLX graph, written to be read beside transformers'
// models/qwen3_5/modeling_qwen3_5.py: the names (input_layernorm, linear_attn, in_proj_qkv,
// conv1d, A_log, dt_bias, self_attn, q_proj, q_norm, rotate_half, o_proj, mlp, norm) are theirs.
//
// The same layers serve the full and the cached paths and the training forward, as Qwen3's do:
// for each of B sequences a chunk of S token IDs (padded; only the first valid[b] are real)
// starting at position start[b], on top of a cache holding, per full-attention layer, keys and
// values (each sequence's blocks [kvHeads, n, headDim], read in place, see attention; the chunk's
// new ones are returned) and, per Gated DeltaNet layer, the convolution state
// [B, kernel−1, convDim] (the last kernel−1 real inputs of the convolution) and the recurrent
// state [B, valueHeads, keyDim, valueDim] in float32; or, in training, on no cache (zero states).
// Padding rows leave the DeltaNet states unchanged: their β and g are 0, so they write nothing
// and decay nothing, and the convolution state is cut at each sequence's last real row.

import (
	"fmt"
	"math"

	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/shapes"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // the graph DSL reads best unqualified
)

// layers is Qwen3_5TextModel.forward: embed_tokens, then the decoder layers. It returns the
// hidden state after the embedding and after each layer (len NLayers+1), and the new state.
func (q qwen35) layers(s *step, w weightSet, state []*Node) ([]*Node, []*Node) {
	c := q.c
	rope := newRotary(s.positions, c.RotaryDim, c.RopeTheta, true) // Qwen3_5TextRotaryEmbedding, text positions
	p := c.WeightPrefix()
	hidden := s.embed(w, p+"embed_tokens.weight") // [B, S, hidden]
	hiddens := []*Node{hidden}
	var newState []*Node
	for i := range c.LayerTypes {
		var s0, s1 *Node
		if s.cached {
			s0, s1 = state[2*i], state[2*i+1]
		}
		hidden, s0, s1 = q.decoderLayer(s, w.under(fmt.Sprintf("%slayers.%d.", p, i)), i, s.layerInput(hidden), rope, s0, s1)
		hiddens = append(hiddens, hidden)
		if s.cached {
			newState = append(newState, s0, s1)
		}
	}
	hiddens[len(hiddens)-1] = s.layersOutput(hidden)
	return hiddens, newState
}

// decoderLayer is Qwen3_5DecoderLayer.forward: the token mixer of layer i's type (full
// attention or Gated DeltaNet) on its two cache states, then the MLP, each with a residual.
func (q qwen35) decoderLayer(s *step, w weightSet, i int, hidden *Node, rope *rotary, state0, state1 *Node) (out, new0, new1 *Node) {
	c := q.c
	residual := hidden
	x := zeroCenteredRMSNorm(s.ops, hidden, w.get("input_layernorm.weight"), c.NormEps)
	var mixed *Node
	if c.LayerTypes[i] == FullAttention {
		mixed, new0, new1 = q.attention(s, w.under("self_attn."), x, rope, s.kvAt(2*i), s.kvAt(2*i+1))
	} else {
		mixed, new0, new1 = q.gatedDeltaNet(s, w.under("linear_attn."), x, state0, state1)
	}
	hidden = Add(residual, mixed)

	residual = hidden
	x = zeroCenteredRMSNorm(s.ops, hidden, w.get("post_attention_layernorm.weight"), c.NormEps)
	return Add(residual, s.mlp(w.under("mlp."), x)), new0, new1 // Qwen3_5MLP is Qwen3MLP
}

// logits is the final norm, then lm_head (embed_tokens when tied), on hidden [P, hidden].
func (q qwen35) logits(s *step, w weightSet, hidden *Node) *Node {
	p := q.c.WeightPrefix()
	hidden = zeroCenteredRMSNorm(s.ops, hidden, w.get(p+"norm.weight"), q.c.NormEps)
	head := p + "embed_tokens.weight"
	if !q.c.Tied {
		head = TiedHeadName
	}
	return s.ops.head(hidden, w.table(head))
}

// attention is Qwen3_5Attention: q_proj gives a query and an output gate per head; q_norm and
// k_norm; RoPE on the first RotaryDim dims of each head (rotate_half pairing); eager attention
// (on the cache's blocks, if any); the output times sigmoid(gate); o_proj. x: [B, S, hidden].
func (q qwen35) attention(s *step, w weightSet, x *Node, rope *rotary, kCache, vCache kvBlocks) (out, newK, newV *Node) {
	c := q.c
	o := s.ops
	batch, seqLen := x.Shape().Dimensions[0], x.Shape().Dimensions[1]
	heads, kvHeads, hd := c.Heads, c.KVHeads, c.HeadDim

	qkv := o.projections(x, w, "q_proj.weight", "k_proj.weight", "v_proj.weight")
	qg := Reshape(qkv[0], batch, seqLen, heads, 2*hd) // per head: query | gate
	query := SliceAxis(qg, -1, AxisRange(0, hd))
	gate := Reshape(SliceAxis(qg, -1, AxisRange(hd, 2*hd)), batch, seqLen, heads*hd)
	query = zeroCenteredRMSNorm(o, query, w.get("q_norm.weight"), c.NormEps)
	key := zeroCenteredRMSNorm(o, Reshape(qkv[1], batch, seqLen, kvHeads, hd), w.get("k_norm.weight"), c.NormEps)
	value := Reshape(qkv[2], batch, seqLen, kvHeads, hd)
	query = partialRotary(s.ops, query, rope, c.RotaryDim)
	key = partialRotary(s.ops, key, rope, c.RotaryDim)
	ctx, newK, newV := attention(s, query, key, value, kCache, vCache)
	ctx = Mul(ctx, o.sigmoid(gate))
	return o.project(ctx, w, "o_proj.weight"), newK, newV
}

// partialRotary is apply_rotary_pos_emb with a partial rotary factor: the first rotaryDim
// dims of each head rotate (rotate_half pairing within them), the rest pass through.
// x: [B, S, heads, headDim]; rope: split tables of rotaryDim channels.
func partialRotary(o ops, x *Node, rope *rotary, rotaryDim int) *Node {
	headDim := x.Shape().Dimensions[x.Rank()-1]
	rot := rope.apply(o, SliceAxis(x, -1, AxisRange(0, rotaryDim)))
	if rotaryDim == headDim {
		return rot
	}
	return Concatenate([]*Node{rot, SliceAxis(x, -1, AxisRange(rotaryDim, headDim))}, -1)
}

// gatedDeltaNet is Qwen3_5GatedDeltaNet on a chunk x [B, S, hidden] on top of its states: the
// convolution state [B, kernel−1, convDim] and the recurrent state [B, valueHeads, keyDim,
// valueDim] (without a cache, s.cached false: zeros, and no new states are returned).
func (q qwen35) gatedDeltaNet(s *step, w weightSet, x, convState, recState *Node) (out, newConv, newRec *Node) {
	c := q.c
	g := x.Graph()
	o, valid, real := s.ops, s.valid, s.real
	batch, seqLen := x.Shape().Dimensions[0], x.Shape().Dimensions[1]
	kh, vh, dk, dv := c.LinKeyHeads, c.LinValueHeads, c.LinKeyDim, c.LinValueDim
	f32 := wide(x).DType()

	proj := o.projections(x, w, "in_proj_qkv.weight", "in_proj_z.weight", "in_proj_b.weight", "in_proj_a.weight")
	mixedQKV := ConvertDType(proj[0], f32) // [B, S, convDim]
	z := Reshape(proj[1], batch, seqLen, vh, dv)
	b := ConvertDType(proj[2], f32) // [B, S, vh]
	a := ConvertDType(proj[3], f32)
	if !s.cached {
		convState = Zeros(g, shapes.Make(f32, batch, c.ConvKernel-1, c.ConvDim()))
		recState = Zeros(g, shapes.Make(f32, batch, vh, dk, dv))
	}

	// conv1d: causal depthwise convolution over time, kernel K, the previous K−1 inputs from
	// the state (zeros at the start), then SiLU. out[t] = Σ_j w[j] · in[t + j].
	kernel := c.ConvKernel
	in := Concatenate([]*Node{ConvertDType(convState, f32), mixedQKV}, 1) // [B, K−1+S, convDim]
	weight := Reshape(ConvertDType(w.get("conv1d.weight"), f32), c.ConvDim(), kernel)
	var conv *Node
	for j := range kernel {
		term := Mul(SliceAxis(in, 1, AxisRange(j, j+seqLen)), Reshape(SliceAxis(weight, 1, AxisElem(j)), 1, 1, c.ConvDim()))
		if conv == nil {
			conv = term
		} else {
			conv = Add(conv, term)
		}
	}
	conv = o.silu(conv)
	if s.cached {
		// The new state is the last K−1 real inputs of each row: rows valid … valid+K−2 of in.
		window := kernel - 1 + seqLen
		rows := Add(InsertAxes(Add(valid, MulScalar(Iota(g, shapes.Make(dtypes.Int32, batch), 0), window)), -1),
			Iota(g, shapes.Make(dtypes.Int32, batch, kernel-1), 1)) // [B, K−1] into the rows of in
		newConv = Gather(Reshape(in, batch*window, c.ConvDim()), InsertAxes(rows, -1)) // [B, K−1, convDim]
	}

	qh := Reshape(SliceAxis(conv, 2, AxisRange(0, c.KeyDim())), batch, seqLen, kh, dk)
	k := Reshape(SliceAxis(conv, 2, AxisRange(c.KeyDim(), 2*c.KeyDim())), batch, seqLen, kh, dk)
	v := Reshape(SliceAxis(conv, 2, AxisRange(2*c.KeyDim(), c.ConvDim())), batch, seqLen, vh, dv)

	// β = sigmoid(b), g = −exp(A_log) · softplus(a + dt_bias); 0 on padding rows.
	beta := o.sigmoid(b)
	aLog := broadcastLast(ConvertDType(w.get("A_log"), f32), a)
	dtBias := broadcastLast(ConvertDType(w.get("dt_bias"), f32), a)
	decay := Mul(Neg(Exp(aLog)), softplus(Add(a, dtBias)))
	mask := BroadcastToDims(InsertAxes(real, -1), batch, seqLen, vh)
	beta = Where(mask, beta, ZerosLike(beta))
	decay = Where(mask, decay, ZerosLike(decay))

	// l2norm with eps 1e-6 inside the root, then q scaled by 1/√dk.
	query := MulScalar(l2norm(o, qh), 1/math.Sqrt(float64(dk)))
	k = l2norm(o, k)
	// Value head h reads key head h / (vh/kh): repeat_interleave on the head axis.
	if r := vh / kh; r > 1 {
		query = Reshape(BroadcastToDims(InsertAxes(query, 3), batch, seqLen, kh, r, dk), batch, seqLen, vh, dk)
		k = Reshape(BroadcastToDims(InsertAxes(k, 3), batch, seqLen, kh, r, dk), batch, seqLen, vh, dk)
	}

	// The rule runs per (row, head): the batch folds into its head axis, [S, B·vh, …].
	fold := func(t *Node) *Node {
		dims := t.Shape().Dimensions
		if t.Rank() == 3 { // [B, S, vh]
			return Reshape(TransposeAllAxes(t, 1, 0, 2), seqLen, batch*vh)
		}
		return Reshape(TransposeAllAxes(t, 1, 0, 2, 3), seqLen, batch*vh, dims[3])
	}
	core, final := chunkGatedDeltaRule(fold(query), fold(k), fold(v), fold(beta), fold(decay),
		Reshape(recState, batch*vh, dk, dv), deltaChunk(seqLen))
	core = TransposeAllAxes(Reshape(core, seqLen, batch, vh, dv), 1, 0, 2, 3) // [B, S, vh, dv]
	core = rmsNormGated(o, core, z, w.get("norm.weight"), c.NormEps)          // [B, S, vh, dv]
	core = ConvertDType(Reshape(core, batch, seqLen, vh*dv), x.DType())
	if s.cached {
		newRec = Reshape(final, batch, vh, dk, dv)
	}
	return o.project(core, w, "out_proj.weight"), newConv, newRec
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
