package octlm

// Qwen3: octlm's own decoder (Config, with its five switches) as Hugging Face's Qwen3 runs it,
// written to be read beside transformers' models/qwen3/modeling_qwen3.py: the names
// (embed_tokens, input_layernorm, q_proj, q_norm, rotate_half, o_proj, post_attention_layernorm,
// gate_proj, up_proj, down_proj, norm, lm_head) are theirs. The products, lookups and rsqrt go
// through s.ops, the engine's layout (engine.go).

import (
	"fmt"
	"math"

	"github.com/gomlx/compute/dtypes"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // the graph DSL reads best unqualified
)

// Checkpoint names of the embedding and the output head. With a tied head (Config.UntiedHead
// off) the head is the embedding: Qwen3 checkpoints still store a copy under TiedHeadName,
// accepted only if it equals model.embed_tokens.weight. With an untied head it is the head's
// own weight, required.
const (
	TiedHeadName  = "lm_head.weight"
	EmbeddingName = "model.embed_tokens.weight"
)

// qwen3 is the Qwen3 architecture of a Config.
type qwen3 struct{ c Config }

func init() {
	registerArchitecture("qwen3", func(data []byte) (architecture, error) {
		c, err := QwenConfig(data)
		if err != nil {
			return nil, err
		}
		return qwen3{c}, nil
	})
}

func (q qwen3) config() Config { return q.c }

func (q qwen3) skip(string) bool { return false }

func (q qwen3) sizeNames() ([]string, string) {
	return []string{EmbeddingName, TiedHeadName}, "model.layers."
}

// weights is Qwen3ForCausalLM's state dict, in graph order.
func (q qwen3) weights() []weightSpec {
	c := q.c
	d, hd, ff := c.DModel, c.HeadWidth(), c.FFWidth()
	linear := func(name string, out, in int) weightSpec {
		return weightSpec{Name: name, Shape: []int{out, in}, Kind: linearWeight}
	}
	fused := func(group string, s weightSpec) weightSpec { s.Fuse = group; return s }
	vector := func(name string, n int) weightSpec { return weightSpec{Name: name, Shape: []int{n}} }
	embed := weightSpec{Name: EmbeddingName, Shape: []int{c.VocabSize, d}, Kind: tableWeight}
	if !c.UntiedHead {
		embed.Copy = TiedHeadName
	}
	specs := []weightSpec{embed, vector("model.norm.weight", d)}
	for i := range c.NLayers {
		p := fmt.Sprintf("model.layers.%d.", i)
		specs = append(specs,
			vector(p+"input_layernorm.weight", d),
			fused(p+"self_attn.qkv", linear(p+"self_attn.q_proj.weight", c.NHeads*hd, d)),
			fused(p+"self_attn.qkv", linear(p+"self_attn.k_proj.weight", c.KVHeads*hd, d)),
			fused(p+"self_attn.qkv", linear(p+"self_attn.v_proj.weight", c.KVHeads*hd, d)),
			linear(p+"self_attn.o_proj.weight", d, c.NHeads*hd),
		)
		if c.QKNorm {
			specs = append(specs, vector(p+"self_attn.q_norm.weight", hd), vector(p+"self_attn.k_norm.weight", hd))
		}
		specs = append(specs,
			vector(p+"post_attention_layernorm.weight", d),
			fused(p+"mlp.gate_up", linear(p+"mlp.gate_proj.weight", ff, d)),
			fused(p+"mlp.gate_up", linear(p+"mlp.up_proj.weight", ff, d)),
			linear(p+"mlp.down_proj.weight", d, ff),
		)
	}
	if c.UntiedHead {
		specs = append(specs, weightSpec{Name: TiedHeadName, Shape: []int{c.VocabSize, d}, Kind: tableWeight})
	}
	return specs
}

// state is every layer's keys and values (after q/k norm and RoPE), [kvHeads, capacity, headDim].
func (q qwen3) state() []stateSpec {
	var specs []stateSpec
	for i := range q.c.NLayers {
		for _, kv := range []string{"k", "v"} {
			specs = append(specs, stateSpec{Name: fmt.Sprintf("layers.%d.%s", i, kv), Dims: []int{q.c.KVHeads, 0, q.c.HeadWidth()}, PosAxis: 1})
		}
	}
	return specs
}

// forward is Qwen3Model.forward: embed_tokens, then the decoder layers.
func (q qwen3) forward(s *step, w weightSet, cache []*Node) (*Node, []*Node) {
	cos, sin := rotaryTables(s.positions, q.c.HeadWidth(), q.c.Base()) // Qwen3RotaryEmbedding
	hidden := s.ops.embed(w.get(EmbeddingName), s.ids)                 // [S, d]
	newCache := make([]*Node, 0, len(cache))
	for i := range q.c.NLayers {
		var k, v *Node
		hidden, k, v = q.decoderLayer(s, w.under(fmt.Sprintf("model.layers.%d.", i)), hidden, cos, sin, cache[2*i], cache[2*i+1])
		newCache = append(newCache, k, v)
	}
	return hidden, newCache
}

// decoderLayer is Qwen3DecoderLayer.forward.
func (q qwen3) decoderLayer(s *step, w weightSet, hidden, cos, sin, kCache, vCache *Node) (out, newK, newV *Node) {
	// Self-attention block with a residual connection.
	residual := hidden
	x := rmsNorm(s.ops, hidden, w.get("input_layernorm.weight"), q.c.Eps())
	attn, newK, newV := q.attention(s, w.under("self_attn."), x, cos, sin, kCache, vCache)
	hidden = Add(residual, attn)

	// Feed-forward block with a residual connection.
	residual = hidden
	x = rmsNorm(s.ops, hidden, w.get("post_attention_layernorm.weight"), q.c.Eps())
	return Add(residual, mlp(s.ops, w.under("mlp."), x)), newK, newV
}

// logits is Qwen3ForCausalLM's tail: the final norm, then lm_head (embed_tokens when tied).
func (q qwen3) logits(s *step, w weightSet, hidden *Node) *Node {
	hidden = rmsNorm(s.ops, hidden, w.get("model.norm.weight"), q.c.Eps())
	head := EmbeddingName
	if q.c.UntiedHead {
		head = TiedHeadName
	}
	return s.ops.head(hidden, w.get(head))
}

// rmsNorm is Qwen3RMSNorm: statistics in float32, then weight * normalized (no 1+w).
func rmsNorm(o ops, x, weight *Node, eps float64) *Node {
	dtype := x.DType()
	x32 := rmsNormalized(o, x, eps)
	for weight.Rank() < x.Rank() {
		weight = InsertAxes(weight, 0)
	}
	return Mul(weight, ConvertDType(x32, dtype))
}

// mlp is Qwen3MLP: down_proj(silu(gate_proj(x)) * up_proj(x)).
func mlp(o ops, w weightSet, x *Node) *Node {
	gateUp := o.projections(x, w, "gate_proj.weight", "up_proj.weight")
	gate, up := gateUp[0], gateUp[1]
	return o.linear(Mul(o.silu(gate), up), w.get("down_proj.weight"))
}

// attention is Qwen3Attention with a KV cache. x: [S, d]. It writes this chunk's keys and
// values into the caches (zeroed slots; padding rows write zeros, see ops.writeCache)
// and attends over the first Lb slots with the causal mask. Returns o_proj's output and the
// updated caches.
func (q qwen3) attention(s *step, w weightSet, x, cos, sin, kCache, vCache *Node) (out, newK, newV *Node) {
	c := q.c
	g := x.Graph()
	seqLen := x.Shape().Dimensions[0]
	heads, kvHeads, headDim := c.NHeads, c.KVHeads, c.HeadWidth()
	group := heads / kvHeads
	capacity := kCache.Shape().Dimensions[1]
	attendLen := s.causal.Shape().Dimensions[1]

	qkv := s.ops.projections(x, w, "q_proj.weight", "k_proj.weight", "v_proj.weight")
	qs := Reshape(qkv[0], seqLen, heads, headDim)
	k := Reshape(qkv[1], seqLen, kvHeads, headDim)
	v := Reshape(qkv[2], seqLen, kvHeads, headDim)
	if c.QKNorm {
		qs = rmsNorm(s.ops, qs, w.get("q_norm.weight"), c.Eps())
		k = rmsNorm(s.ops, k, w.get("k_norm.weight"), c.Eps())
	}
	qs = applyRotary(qs, cos, sin, c.RopeSplit)
	k = applyRotary(k, cos, sin, c.RopeSplit)

	// Write k and v at cache slots start..start+S-1 of every kv head; padding rows write zeros.
	// The cache holds the activations' dtype or a narrower one (a bfloat16 cache under float32
	// activations: keys and values are rounded).
	dtype := k.DType()
	keep := ConvertDType(Reshape(s.real, seqLen, 1, 1), dtype)
	perHead := func(t *Node) *Node { return TransposeAllAxes(Mul(t, keep), 1, 0, 2) } // [kvHeads, S, headDim]
	k = ConvertDType(perHead(k), kCache.DType())
	v = ConvertDType(perHead(v), vCache.DType())
	newK = s.ops.writeCache(kCache, k, s.start)
	newV = s.ops.writeCache(vCache, v, s.start)

	// Attend over the first Lb slots.
	keys, values := newK, newV
	if attendLen < capacity {
		keys = SliceAxis(newK, 1, AxisRange(0, attendLen))
		values = SliceAxis(newV, 1, AxisRange(0, attendLen))
	}
	keys, values = ConvertDType(keys, dtype), ConvertDType(values, dtype)
	// Grouped-query attention without copying K/V per query head: query head h uses kv head
	// h / group, so q is laid out [kvHeads, group, S, headDim] and kv heads are the batch axis.
	qs = TransposeAllAxes(Reshape(qs, seqLen, kvHeads, group, headDim), 1, 2, 0, 3)
	// The causal mask as a bias added to the scores: 0 where attended, -inf elsewhere (x + 0 is
	// x exactly), [1, 1, S, Lb], broadcast over heads.
	bias := Where(s.causal, BroadcastToDims(ScalarZero(g, dtypes.Float32), seqLen, attendLen),
		BroadcastToDims(Infinity(g, dtypes.Float32, -1), seqLen, attendLen))
	bias = Reshape(bias, 1, 1, seqLen, attendLen)
	scores := s.ops.dotLastAxes(Reshape(qs, kvHeads, group*seqLen, headDim), keys, 1) // [kvHeads, group·S, Lb]
	scores = MulScalar(scores, 1/math.Sqrt(float64(headDim)))
	scores = Add(Reshape(ConvertDType(scores, dtypes.Float32), kvHeads, group, seqLen, attendLen), bias)
	probs := ConvertDType(Reshape(Softmax(scores, -1), kvHeads, group*seqLen, attendLen), values.DType())
	ctx := DotGeneral(probs, []int{2}, []int{0}, values, []int{1}, []int{0}) // [kvHeads, group·S, headDim]
	ctx = TransposeAllAxes(Reshape(ctx, kvHeads, group, seqLen, headDim), 2, 0, 1, 3)
	ctx = Reshape(ctx, seqLen, heads*headDim) // [S, heads·headDim], head h = kv·group + g
	return s.ops.linear(ctx, w.get("o_proj.weight")), newK, newV
}
