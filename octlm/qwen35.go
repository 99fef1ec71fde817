package octlm

// Qwen3.5 behind the architecture seam: its config (qwen35_config.go), its weight table, what
// its cache holds, and its graph (qwen35_graph.go).

import (
	"fmt"
	"strings"
)

// qwen35 is the Qwen3.5 text decoder of a Qwen35Config.
type qwen35 struct{ c Qwen35Config }

func init() {
	for _, modelType := range []string{"qwen3_5", "qwen3_5_text"} {
		registerArchitecture(modelType, func(data []byte) (architecture, error) {
			c, err := Qwen35ConfigFrom(data)
			if err != nil {
				return nil, err
			}
			return qwen35{c}, nil
		})
	}
}

// qwen35SkippedPrefixes are the tensors a text decoder does not use: the vision tower and the
// multi-token-prediction head. Load skips them without reading their bytes.
var qwen35SkippedPrefixes = [...]string{"model.visual.", "mtp."}

// Qwen35SkippedPrefixes are the name prefixes of the checkpoint tensors a Qwen3.5 text decoder
// skips (the vision tower, the multi-token-prediction head), a new slice on each call.
func Qwen35SkippedPrefixes() []string { return append([]string(nil), qwen35SkippedPrefixes[:]...) }

// SkippedTensors counts the checkpoint tensors under one skipped prefix.
type SkippedTensors struct {
	Prefix string `json:"prefix"`
	Count  int    `json:"count"`
	Bytes  int64  `json:"bytes"`
}

func (q qwen35) shape() Shape {
	c := q.c
	return Shape{Vocab: c.VocabSize, Context: c.ContextLength, Width: c.Hidden, Heads: c.Heads, Layers: c.NLayers}
}

func (q qwen35) sizeNames() ([]string, string) {
	p := q.c.WeightPrefix()
	return []string{p + "embed_tokens.weight"}, p + "layers."
}

func (q qwen35) skip(name string) bool {
	for _, p := range qwen35SkippedPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// layerTypes are layer_types, for the trace.
func (q qwen35) layerTypes() []string { return q.c.LayerTypes }

// weights is Qwen3_5ForCausalLM's text weights, in graph order. The norms, the DeltaNet's gates
// and its convolution stay float32 in a half-precision model (the reference computes them so).
func (q qwen35) weights() []weightSpec { return qwen35WeightSpecs(q.c) }

func qwen35WeightSpecs(c Qwen35Config) []weightSpec {
	p := c.WeightPrefix()
	d := c.Hidden
	vec := func(name string, n int) weightSpec { return weightSpec{Name: name, Shape: []int{n}, Float32: true} }
	lin := func(name string, out, in int) weightSpec {
		return weightSpec{Name: name, Shape: []int{out, in}, Kind: linearWeight}
	}
	fused := func(group string, s weightSpec) weightSpec { s.Fuse = group; return s }
	embed := weightSpec{Name: p + "embed_tokens.weight", Shape: []int{c.VocabSize, d}, Kind: tableWeight}
	if c.Tied {
		embed.Copy = TiedHeadName // not stored by the Hub's tied models; equal if it is
	}
	specs := []weightSpec{embed, vec(p+"norm.weight", d)}
	for i, t := range c.LayerTypes {
		l := fmt.Sprintf("%slayers.%d.", p, i)
		specs = append(specs,
			vec(l+"input_layernorm.weight", d), vec(l+"post_attention_layernorm.weight", d),
			fused(l+"mlp.gate_up", lin(l+"mlp.gate_proj.weight", c.FF, d)), fused(l+"mlp.gate_up", lin(l+"mlp.up_proj.weight", c.FF, d)),
			lin(l+"mlp.down_proj.weight", d, c.FF))
		if t == FullAttention {
			a := l + "self_attn."
			specs = append(specs,
				fused(a+"qkv", lin(a+"q_proj.weight", 2*c.Heads*c.HeadDim, d)), fused(a+"qkv", lin(a+"k_proj.weight", c.KVHeads*c.HeadDim, d)),
				fused(a+"qkv", lin(a+"v_proj.weight", c.KVHeads*c.HeadDim, d)), lin(a+"o_proj.weight", d, c.Heads*c.HeadDim),
				vec(a+"q_norm.weight", c.HeadDim), vec(a+"k_norm.weight", c.HeadDim))
			continue
		}
		a := l + "linear_attn."
		specs = append(specs,
			fused(a+"in_proj", lin(a+"in_proj_qkv.weight", c.ConvDim(), d)), fused(a+"in_proj", lin(a+"in_proj_z.weight", c.ValueDim(), d)),
			fused(a+"in_proj", lin(a+"in_proj_b.weight", c.LinValueHeads, d)), fused(a+"in_proj", lin(a+"in_proj_a.weight", c.LinValueHeads, d)),
			weightSpec{Name: a + "conv1d.weight", Shape: []int{c.ConvDim(), 1, c.ConvKernel}, Float32: true},
			vec(a+"A_log", c.LinValueHeads), vec(a+"dt_bias", c.LinValueHeads), vec(a+"norm.weight", c.LinValueDim),
			lin(a+"out_proj.weight", d, c.ValueDim()))
	}
	if !c.Tied {
		specs = append(specs, weightSpec{Name: TiedHeadName, Shape: []int{c.VocabSize, d}, Kind: tableWeight})
	}
	return specs
}

// state is, per layer in order: for full attention its keys and values (after q/k norm and
// RoPE) [kvHeads, capacity, headDim]; for Gated DeltaNet the convolution state, the last
// kernel−1 inputs [kernel−1, convDim], and the recurrent state [valueHeads, keyDim, valueDim],
// both float32 and of constant size.
func (q qwen35) state() []stateSpec {
	c := q.c
	var specs []stateSpec
	for i, t := range c.LayerTypes {
		if t == FullAttention {
			for _, kv := range []string{"k", "v"} {
				specs = append(specs, stateSpec{Name: fmt.Sprintf("layers.%d.%s", i, kv), Dims: []int{c.KVHeads, 0, c.HeadDim}, PosAxis: 1, Values: kv == "v", Keys: kv == "k"})
			}
			continue
		}
		specs = append(specs,
			stateSpec{Name: fmt.Sprintf("layers.%d.conv", i), Dims: []int{c.ConvKernel - 1, c.ConvDim()}, PosAxis: -1, Float32: true},
			stateSpec{Name: fmt.Sprintf("layers.%d.recurrent", i), Dims: []int{c.LinValueHeads, c.LinKeyDim, c.LinValueDim}, PosAxis: -1, Float32: true})
	}
	return specs
}
