package octlm

// Qwen3: octlm's own decoder (Config, with its five switches) as Hugging Face's Qwen3 runs it,
// written to be read beside transformers' models/qwen3/modeling_qwen3.py: the names
// (embed_tokens, input_layernorm, q_proj, q_norm, rotate_half, o_proj, post_attention_layernorm,
// gate_proj, up_proj, down_proj, norm, lm_head) are theirs. The norms, the MLP and the attention
// are blocks.go's; the products, lookups and rsqrt go through s.ops, the engine's layout
// (engine.go). Activations carry a batch axis, [B, S, d].

import (
	"fmt"

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
		c, err := Qwen3ConfigFrom(data)
		if err != nil {
			return nil, err
		}
		return qwen3{c}, nil
	})
}

func (q qwen3) shape() Shape {
	return Shape{Vocab: q.c.VocabSize, Context: q.c.ContextLength, Width: q.c.DModel, Heads: q.c.NHeads, Layers: q.c.NLayers}
}

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
			specs = append(specs, stateSpec{Name: fmt.Sprintf("layers.%d.%s", i, kv), Dims: []int{q.c.KVHeads, 0, q.c.HeadWidth()}, PosAxis: 1, Values: kv == "v", Keys: kv == "k"})
		}
	}
	return specs
}

// layers is Qwen3Model.forward: embed_tokens, then the decoder layers, keeping each one's output
// and its new keys and values (its cache is all position-indexed: s.kv, no fixed-size state).
func (q qwen3) layers(s *step, w weightSet, _ []*Node) ([]*Node, []*Node) {
	rope := newRotary(s.positions, q.c.HeadWidth(), q.c.Base(), q.c.RopeSplit) // Qwen3RotaryEmbedding
	hidden := s.embed(w, EmbeddingName)                                        // [B, S, d]
	hiddens := []*Node{hidden}
	var newCache []*Node
	for i := range q.c.NLayers {
		var k, v *Node
		hidden, k, v = q.decoderLayer(s, w.under(fmt.Sprintf("model.layers.%d.", i)), s.layerInput(hidden), rope, s.kvAt(2*i), s.kvAt(2*i+1))
		hiddens = append(hiddens, hidden)
		if s.cached {
			newCache = append(newCache, k, v)
		}
	}
	hiddens[len(hiddens)-1] = s.layersOutput(hidden)
	return hiddens, newCache
}

// layerTypes: every Qwen3 layer is the same decoder layer.
func (q qwen3) layerTypes() []string {
	types := make([]string, q.c.NLayers)
	for i := range types {
		types[i] = "decoder"
	}
	return types
}

// decoderLayer is Qwen3DecoderLayer.forward.
func (q qwen3) decoderLayer(s *step, w weightSet, hidden *Node, rope *rotary, kCache, vCache kvBlocks) (out, newK, newV *Node) {
	// Self-attention block with a residual connection.
	residual := hidden
	x := s.rmsNorm(hidden, w.get("input_layernorm.weight"), q.c.Eps())
	attn, newK, newV := q.attention(s, w.under("self_attn."), x, rope, kCache, vCache)

	// Feed-forward block with a residual connection: hidden = residual + attn, then
	// post_attention_layernorm (one step where the layout runs norms in Go).
	hidden, x = s.addRMSNorm(residual, attn, w.get("post_attention_layernorm.weight"), q.c.Eps())
	return Add(hidden, s.mlp(w.under("mlp."), x)), newK, newV
}

// attention is Qwen3Attention: q/k/v projections, q_norm and k_norm, RoPE, eager attention
// (on the cache's blocks, if any, see attention), o_proj. x: [B, S, d].
func (q qwen3) attention(s *step, w weightSet, x *Node, rope *rotary, kCache, vCache kvBlocks) (out, newK, newV *Node) {
	c := q.c
	batch, seqLen := x.Shape().Dimensions[0], x.Shape().Dimensions[1]
	qkv := s.ops.projections(x, w, "q_proj.weight", "k_proj.weight", "v_proj.weight")
	query := Reshape(qkv[0], batch, seqLen, c.NHeads, c.HeadWidth())
	key := Reshape(qkv[1], batch, seqLen, c.KVHeads, c.HeadWidth())
	value := Reshape(qkv[2], batch, seqLen, c.KVHeads, c.HeadWidth())
	if c.QKNorm {
		query = s.rmsNorm(query, w.get("q_norm.weight"), c.Eps())
		key = s.rmsNorm(key, w.get("k_norm.weight"), c.Eps())
	}
	query = s.rope(rope, query)
	key = s.rope(rope, key)
	ctx, newK, newV := attention(s, query, key, value, kCache, vCache)
	return s.ops.project(ctx, w, "o_proj.weight"), newK, newV
}

// logits is Qwen3ForCausalLM's tail: the final norm, then lm_head (embed_tokens when tied).
func (q qwen3) logits(s *step, w weightSet, hidden *Node) *Node {
	hidden = s.rmsNorm(hidden, w.get("model.norm.weight"), q.c.Eps())
	head := EmbeddingName
	if q.c.UntiedHead {
		head = TiedHeadName
	}
	return s.ops.head(hidden, w.table(head))
}
