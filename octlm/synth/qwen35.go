package synth

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/octlm/octlm/loader"
)

// Qwen35Like holds the text_config values of a Qwen3.5 checkpoint (the multimodal
// Qwen3_5ForConditionalGeneration layout the Hub ships).
type Qwen35Like struct {
	VocabSize, HiddenSize, NumLayers           int
	NumHeads, NumKVHeads, HeadDim              int
	IntermediateSize, MaxPositionEmbeddings    int
	LinearKeyHeads, LinearValueHeads           int
	LinearKeyHeadDim, LinearValueHeadDim       int
	ConvKernel, FullAttentionInterval          int
	RopeTheta, PartialRotaryFactor, RMSNormEps float64
	MRopeSection                               [3]int
	EOSTokenID                                 int
	Tied                                       bool
	// VisionHidden sizes the placeholder vision tensors (model.visual.*): a patch embedding and
	// the merger's output projection, so that a loader's skipping is exercised; not a whole tower.
	VisionHidden int
}

func qwen35Base() Qwen35Like {
	return Qwen35Like{
		VocabSize: 248320, NumLayers: 24, NumHeads: 8, NumKVHeads: 2, HeadDim: 256, MaxPositionEmbeddings: 262144,
		LinearKeyHeads: 16, LinearValueHeads: 16, LinearKeyHeadDim: 128, LinearValueHeadDim: 128,
		ConvKernel: 4, FullAttentionInterval: 4, RopeTheta: 1e7, PartialRotaryFactor: 0.25, RMSNormEps: 1e-6,
		MRopeSection: [3]int{11, 11, 10}, EOSTokenID: 248044, Tied: true, VisionHidden: 768,
	}
}

// Qwen35_0_8B is Qwen3.5-0.8B's text decoder (the presets are the text_config shapes of the
// Hub's small Qwen3.5 models, QWEN35.md's table).
func Qwen35_0_8B() Qwen35Like {
	c := qwen35Base()
	c.HiddenSize, c.IntermediateSize = 1024, 3584
	return c
}

// Qwen35_2B is Qwen3.5-2B's text decoder.
func Qwen35_2B() Qwen35Like {
	c := qwen35Base()
	c.HiddenSize, c.IntermediateSize = 2048, 6144
	return c
}

// Qwen35_4B is Qwen3.5-4B's text decoder (more value heads than key heads).
func Qwen35_4B() Qwen35Like {
	c := qwen35Base()
	c.HiddenSize, c.IntermediateSize, c.NumLayers = 2560, 9216, 32
	c.NumHeads, c.NumKVHeads, c.LinearValueHeads = 16, 4, 32
	return c
}

// Qwen35_9B is Qwen3.5-9B's text decoder (untied head).
func Qwen35_9B() Qwen35Like {
	c := Qwen35_4B()
	c.HiddenSize, c.IntermediateSize, c.Tied = 4096, 12288, false
	return c
}

// Qwen35LikeNames returns the names Qwen35LikeNamed knows, smallest first.
func Qwen35LikeNames() []string {
	return []string{"qwen3.5-0.8b", "qwen3.5-2b", "qwen3.5-4b", "qwen3.5-9b"}
}

// Qwen35LikeNamed returns a named Qwen3.5 configuration, or false.
func Qwen35LikeNamed(name string) (Qwen35Like, bool) {
	switch strings.ToLower(strings.TrimPrefix(name, "Qwen/")) {
	case "qwen3.5-0.8b":
		return Qwen35_0_8B(), true
	case "qwen3.5-2b":
		return Qwen35_2B(), true
	case "qwen3.5-4b":
		return Qwen35_4B(), true
	case "qwen3.5-9b":
		return Qwen35_9B(), true
	}
	return Qwen35Like{}, false
}

// Validate checks sizes and head divisibility.
func (c Qwen35Like) Validate() error {
	for _, f := range []struct {
		name string
		v    int
	}{
		{"vocab_size", c.VocabSize}, {"hidden_size", c.HiddenSize}, {"num_hidden_layers", c.NumLayers},
		{"num_attention_heads", c.NumHeads}, {"num_key_value_heads", c.NumKVHeads}, {"head_dim", c.HeadDim},
		{"intermediate_size", c.IntermediateSize}, {"linear_num_key_heads", c.LinearKeyHeads},
		{"linear_num_value_heads", c.LinearValueHeads}, {"linear_key_head_dim", c.LinearKeyHeadDim},
		{"linear_value_head_dim", c.LinearValueHeadDim}, {"linear_conv_kernel_dim", c.ConvKernel},
		{"full_attention_interval", c.FullAttentionInterval},
	} {
		if f.v <= 0 {
			return fmt.Errorf("synth: %s must be positive, got %d", f.name, f.v)
		}
	}
	if c.NumHeads%c.NumKVHeads != 0 || c.LinearValueHeads%c.LinearKeyHeads != 0 {
		return fmt.Errorf("synth: heads must be multiples of kv heads, value heads of key heads")
	}
	if c.EOSTokenID < 0 || c.EOSTokenID >= c.VocabSize {
		return fmt.Errorf("synth: eos token id %d outside the vocabulary of %d", c.EOSTokenID, c.VocabSize)
	}
	return nil
}

// LayerTypes is layer_types: every FullAttentionInterval-th layer full attention.
func (c Qwen35Like) LayerTypes() []string {
	out := make([]string, c.NumLayers)
	for i := range out {
		out[i] = "linear_attention"
		if (i+1)%c.FullAttentionInterval == 0 {
			out[i] = "full_attention"
		}
	}
	return out
}

// Tensors lists every stored tensor under the Hub's names in declaration order: the text
// decoder under model.language_model., placeholder model.visual.* tensors, lm_head.weight when
// untied, and the MTP head's projection and norms (mtp.*). BF16, except linear_attn.norm.weight
// (F32, as reported for the Hub's files).
func (c Qwen35Like) Tensors() []loader.TensorSpec {
	H := c.HiddenSize
	bf := func(name string, shape ...int) loader.TensorSpec {
		return loader.TensorSpec{Name: name, DType: loader.BF16, Shape: shape}
	}
	keyDim, valueDim := c.LinearKeyHeads*c.LinearKeyHeadDim, c.LinearValueHeads*c.LinearValueHeadDim
	p := "model.language_model."
	out := []loader.TensorSpec{bf(p+"embed_tokens.weight", c.VocabSize, H)}
	for i, t := range c.LayerTypes() {
		l := fmt.Sprintf("%slayers.%d.", p, i)
		if t == "full_attention" {
			out = append(out,
				bf(l+"self_attn.q_proj.weight", 2*c.NumHeads*c.HeadDim, H),
				bf(l+"self_attn.k_proj.weight", c.NumKVHeads*c.HeadDim, H),
				bf(l+"self_attn.v_proj.weight", c.NumKVHeads*c.HeadDim, H),
				bf(l+"self_attn.o_proj.weight", H, c.NumHeads*c.HeadDim),
				bf(l+"self_attn.q_norm.weight", c.HeadDim),
				bf(l+"self_attn.k_norm.weight", c.HeadDim))
		} else {
			a := l + "linear_attn."
			out = append(out,
				bf(a+"conv1d.weight", 2*keyDim+valueDim, 1, c.ConvKernel),
				bf(a+"dt_bias", c.LinearValueHeads),
				bf(a+"A_log", c.LinearValueHeads),
				loader.TensorSpec{Name: a + "norm.weight", DType: loader.F32, Shape: []int{c.LinearValueHeadDim}},
				bf(a+"out_proj.weight", H, valueDim),
				bf(a+"in_proj_qkv.weight", 2*keyDim+valueDim, H),
				bf(a+"in_proj_z.weight", valueDim, H),
				bf(a+"in_proj_b.weight", c.LinearValueHeads, H),
				bf(a+"in_proj_a.weight", c.LinearValueHeads, H))
		}
		out = append(out,
			bf(l+"mlp.gate_proj.weight", c.IntermediateSize, H),
			bf(l+"mlp.up_proj.weight", c.IntermediateSize, H),
			bf(l+"mlp.down_proj.weight", H, c.IntermediateSize),
			bf(l+"input_layernorm.weight", H),
			bf(l+"post_attention_layernorm.weight", H))
	}
	out = append(out, bf(p+"norm.weight", H),
		bf("model.visual.patch_embed.proj.weight", c.VisionHidden, 3, 2, 16, 16),
		bf("model.visual.merger.linear_fc2.weight", H, 4*c.VisionHidden))
	if !c.Tied {
		out = append(out, bf("lm_head.weight", c.VocabSize, H))
	}
	return append(out, bf("mtp.fc.weight", H, 2*H), bf("mtp.norm.weight", H),
		bf("mtp.pre_fc_norm_embedding.weight", H), bf("mtp.pre_fc_norm_hidden.weight", H))
}

// Shards splits the tensors as the Hub's save_pretrained does (see QwenLike.Shards).
func (c Qwen35Like) Shards(maxBytes int64) []Shard { return shardSpecs(c.Tensors(), maxBytes) }

// ConfigJSON renders the multimodal config.json, keys sorted, two-space indent.
func (c Qwen35Like) ConfigJSON() []byte {
	text := map[string]any{
		"model_type": "qwen3_5_text", "attention_bias": false, "attention_dropout": 0.0, "attn_output_gate": true,
		"bos_token_id": nil, "eos_token_id": c.EOSTokenID, "dtype": "bfloat16",
		"full_attention_interval": c.FullAttentionInterval, "head_dim": c.HeadDim, "hidden_act": "silu",
		"hidden_size": c.HiddenSize, "initializer_range": 0.02, "intermediate_size": c.IntermediateSize,
		"layer_types": c.LayerTypes(), "linear_conv_kernel_dim": c.ConvKernel,
		"linear_key_head_dim": c.LinearKeyHeadDim, "linear_num_key_heads": c.LinearKeyHeads,
		"linear_num_value_heads": c.LinearValueHeads, "linear_value_head_dim": c.LinearValueHeadDim,
		"mamba_ssm_dtype": "float32", "max_position_embeddings": c.MaxPositionEmbeddings,
		"mtp_num_hidden_layers": 1, "mtp_use_dedicated_embeddings": false,
		"num_attention_heads": c.NumHeads, "num_hidden_layers": c.NumLayers, "num_key_value_heads": c.NumKVHeads,
		"pad_token_id": nil, "rms_norm_eps": c.RMSNormEps,
		"rope_parameters": map[string]any{"mrope_interleaved": true, "mrope_section": c.MRopeSection[:],
			"partial_rotary_factor": c.PartialRotaryFactor, "rope_theta": c.RopeTheta, "rope_type": "default"},
		"tie_word_embeddings": c.Tied, "use_cache": true, "vocab_size": c.VocabSize,
	}
	top := map[string]any{
		"architectures": []string{"Qwen3_5ForConditionalGeneration"}, "model_type": "qwen3_5",
		"image_token_id": 248056, "video_token_id": 248057, "vision_start_token_id": 248053, "vision_end_token_id": 248054,
		"tie_word_embeddings": c.Tied, "text_config": text,
		"vision_config": map[string]any{"model_type": "qwen3_5", "depth": 1, "hidden_size": c.VisionHidden,
			"in_channels": 3, "num_heads": 12, "out_hidden_size": c.HiddenSize, "patch_size": 16,
			"spatial_merge_size": 2, "temporal_patch_size": 2},
	}
	data, err := json.MarshalIndent(top, "", "  ")
	if err != nil {
		panic(err) // unreachable: plain values
	}
	return append(data, '\n')
}

// WriteQwen35 writes a random Qwen3.5 checkpoint for cfg into dir: config.json and the
// weights, sharded as the Hub's (opts.MaxShardBytes), no tokenizer (Qwen3.5's is not
// available here). Values: N(0, 0.02) for matrices and the zero-centred norms, 1 + N(0, 0.02)
// for linear_attn.norm.weight (a plain weight), dt_bias 1, A_log log U(1, 16).
func WriteQwen35(dir string, cfg Qwen35Like, opts Options) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("synth: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), cfg.ConfigJSON(), 0o644); err != nil {
		return fmt.Errorf("synth: %w", err)
	}
	return writeShards(dir, cfg.Shards(opts.MaxShardBytes), opts, func(path string, specs []loader.TensorSpec) error {
		return writeQwen35File(path, specs, opts)
	})
}

func writeQwen35File(path string, specs []loader.TensorSpec, opts Options) error {
	bar := newFileProgress(opts, path, specs)
	defer bar.close()
	buf := make([]byte, 4*chunkElems)
	return loader.WriteFileFunc(path, specs, fileMetadata, func(i int, w io.Writer) error {
		s := specs[i]
		width := int(s.DType.Bits() / 8)
		n := int(s.Bytes()) / width
		for c := 0; c*chunkElems < n; c++ {
			if opts.Context != nil && opts.Context.Err() != nil {
				return context.Cause(opts.Context)
			}
			m := min(chunkElems, n-c*chunkElems)
			qwen35Fill(buf[:width*m], width, opts.Seed, s.Name, c)
			if _, err := w.Write(buf[:width*m]); err != nil {
				return err
			}
			bar.add(int64(width * m))
		}
		return nil
	})
}

func qwen35Fill(buf []byte, width int, seed int64, name string, c int) {
	rng := chunkRNG(seed, name, c)
	value := func() float32 { return 0.02 * float32(rng.NormFloat64()) }
	switch {
	case strings.HasSuffix(name, "linear_attn.norm.weight"):
		value = func() float32 { return 1 + 0.02*float32(rng.NormFloat64()) }
	case strings.HasSuffix(name, ".dt_bias"):
		value = func() float32 { return 1 }
	case strings.HasSuffix(name, ".A_log"):
		value = func() float32 { return float32(math.Log(1 + 15*rng.Float64())) }
	}
	for i := 0; i < len(buf); i += width {
		v := value()
		if width == 4 {
			binary.LittleEndian.PutUint32(buf[i:], math.Float32bits(v))
		} else {
			binary.LittleEndian.PutUint16(buf[i:], loader.Float32ToBFloat16(v))
		}
	}
}
