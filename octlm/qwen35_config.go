package octlm

// Qwen3.5's configuration: transformers' Qwen3_5TextConfig, read from config.json in either of
// the Hub's forms (the multimodal Qwen3_5ForConditionalGeneration wrapper, whose text_config
// describes the decoder, or a text-only qwen3_5_text config), strictly: every setting the text
// decoder does not implement is refused by name.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"github.com/octlm/octlm/internal/fileio"
)

// Layer types of Qwen3.5's layer_types.
const (
	LinearAttention = "linear_attention" // Gated DeltaNet
	FullAttention   = "full_attention"   // gated softmax attention
)

// Qwen35Config describes a Qwen3.5 text decoder.
type Qwen35Config struct {
	VocabSize     int
	ContextLength int // max_position_embeddings
	Hidden        int // hidden_size
	NLayers       int
	FF            int // intermediate_size
	NormEps       float64

	// Full attention.
	Heads, KVHeads, HeadDim int
	RotaryDim               int     // the first partial_rotary_factor·head_dim dims of a head rotate
	RopeTheta               float64 // rope_parameters.rope_theta

	// Gated DeltaNet.
	LinKeyHeads, LinValueHeads int
	LinKeyDim, LinValueDim     int // per head
	ConvKernel                 int // linear_conv_kernel_dim

	LayerTypes []string // LinearAttention or FullAttention, one per layer
	Tied       bool     // the output head is embed_tokens

	// Multimodal is the Qwen3_5ForConditionalGeneration form: text weights under
	// model.language_model., plus model.visual.* and mtp.* tensors that the decoder skips.
	Multimodal bool
}

// KeyDim is the DeltaNet's key width over all key heads.
func (c Qwen35Config) KeyDim() int { return c.LinKeyHeads * c.LinKeyDim }

// ValueDim is the DeltaNet's value width over all value heads.
func (c Qwen35Config) ValueDim() int { return c.LinValueHeads * c.LinValueDim }

// ConvDim is the convolution's channels: q | k | v.
func (c Qwen35Config) ConvDim() int { return 2*c.KeyDim() + c.ValueDim() }

// CountLayers returns how many layers are of type kind.
func (c Qwen35Config) CountLayers(kind string) int {
	n := 0
	for _, t := range c.LayerTypes {
		if t == kind {
			n++
		}
	}
	return n
}

// WeightPrefix is the prefix of the text decoder's tensor names.
func (c Qwen35Config) WeightPrefix() string {
	if c.Multimodal {
		return "model.language_model."
	}
	return "model."
}

// qwen35Supported lists text_config settings with the only value this decoder implements; a nil
// value means the key must be absent or null. Keys not listed here and not read below are
// checked against qwen35Ignored, so an unknown setting is refused rather than ignored.
var qwen35Supported = []struct {
	key   string
	value any
}{
	{"hidden_act", "silu"},
	{"attention_bias", false},
	{"attention_dropout", 0.0},
	{"attn_output_gate", true},
	{"rope_scaling", nil},
	{"use_sliding_window", false},
	{"sliding_window", nil},
}

// qwen35Ignored are text_config keys that do not change the text decoder's numbers: token IDs,
// training and export settings, the MTP head (its tensors are skipped) and dtype hints.
var qwen35Ignored = map[string]bool{
	"model_type": true, "architectures": true, "bos_token_id": true, "eos_token_id": true,
	"pad_token_id": true, "dtype": true, "torch_dtype": true, "initializer_range": true,
	"use_cache": true, "transformers_version": true, "mtp_num_hidden_layers": true,
	"mtp_use_dedicated_embeddings": true, "output_router_logits": true, "full_attention_interval": true,
	"layer_types": true, "rope_parameters": true, "rope_theta": true, "partial_rotary_factor": true,
	"tie_word_embeddings": true, "mamba_ssm_dtype": true, "max_window_layers": true,
	"hidden_act": true, "attention_bias": true, "attention_dropout": true, "attn_output_gate": true,
	"rope_scaling": true, "use_sliding_window": true, "sliding_window": true, "rms_norm_eps": true,
	"vocab_size": true, "max_position_embeddings": true, "hidden_size": true, "num_hidden_layers": true,
	"num_attention_heads": true, "num_key_value_heads": true, "head_dim": true, "intermediate_size": true,
	"linear_num_key_heads": true, "linear_num_value_heads": true, "linear_key_head_dim": true,
	"linear_value_head_dim": true, "linear_conv_kernel_dim": true, "layer_norm_epsilon": true,
	"name_or_path": true, "_name_or_path": true,
}

// qwen35MoEKeys mark the mixture-of-experts variant (Qwen3.5-35B-A3B and larger).
var qwen35MoEKeys = []string{"num_experts", "num_experts_per_tok", "moe_intermediate_size",
	"shared_expert_intermediate_size", "decoder_sparse_step", "mlp_only_layers"}

// IsQwen35Config reports whether a config.json describes Qwen3.5 (either form, or its MoE
// variant, which Qwen35ConfigFrom then refuses by name).
func IsQwen35Config(data []byte) bool {
	var head struct {
		ModelType string `json:"model_type"`
	}
	if json.Unmarshal(data, &head) != nil {
		return false
	}
	return strings.HasPrefix(head.ModelType, "qwen3_5")
}

// Qwen35ConfigFrom parses a Qwen3.5 config.json, refusing each unsupported setting by name.
func Qwen35ConfigFrom(data []byte) (Qwen35Config, error) {
	top, err := decodeJSONObject(data)
	if err != nil {
		return Qwen35Config{}, fmt.Errorf("octlm: qwen3.5 config: not a JSON object: %w", err)
	}
	var c Qwen35Config
	text := top
	switch mt := top["model_type"]; mt {
	case "qwen3_5":
		c.Multimodal = true
		if err := wantArchitecture(top, "Qwen3_5ForConditionalGeneration"); err != nil {
			return Qwen35Config{}, err
		}
		tc, ok := top["text_config"].(map[string]any)
		if !ok {
			v, present := top["text_config"]
			return Qwen35Config{}, fmt.Errorf("octlm: qwen3.5 config: text_config must be an object, got %s", jsonText(v, present))
		}
		text = tc
		if got := text["model_type"]; got != nil && got != "qwen3_5_text" {
			return Qwen35Config{}, fmt.Errorf("octlm: qwen3.5 config: unsupported setting: text_config.model_type = %s (want \"qwen3_5_text\")", jsonText(got, true))
		}
	case "qwen3_5_text":
		if _, has := top["architectures"]; has && top["architectures"] != nil {
			if err := wantArchitecture(top, "Qwen3_5ForCausalLM"); err != nil {
				return Qwen35Config{}, err
			}
		}
	case "qwen3_5_moe", "qwen3_5_moe_text":
		return Qwen35Config{}, fmt.Errorf("octlm: qwen3.5 config: unsupported setting: model_type = %q (the mixture-of-experts variant)", mt)
	default:
		v, present := top["model_type"]
		return Qwen35Config{}, fmt.Errorf("octlm: qwen3.5 config: model_type = %s (want \"qwen3_5\" or \"qwen3_5_text\")", jsonText(v, present))
	}
	prefix := ""
	if c.Multimodal {
		prefix = "text_config."
	}
	fail := func(format string, args ...any) (Qwen35Config, error) {
		return Qwen35Config{}, fmt.Errorf("octlm: qwen3.5 config: "+format, args...)
	}
	for _, k := range qwen35MoEKeys {
		if v, ok := text[k]; ok && v != nil {
			return fail("unsupported setting: %s%s = %s (the mixture-of-experts variant)", prefix, k, jsonText(v, true))
		}
	}
	for _, s := range qwen35Supported {
		got, present := text[s.key]
		if present && !sameJSONValue(got, s.value) || !present && s.value != nil && s.key == "attn_output_gate" {
			return fail("unsupported setting: %s%s = %s (want %s)", prefix, s.key, jsonText(got, present), jsonText(s.value, true))
		}
	}
	for k := range text {
		if !qwen35Ignored[k] {
			return fail("unknown setting: %s%s (not implemented by this decoder)", prefix, k)
		}
	}
	if v, ok := text["mamba_ssm_dtype"]; ok && v != nil && v != "float32" {
		return fail("unsupported setting: %smamba_ssm_dtype = %s (want \"float32\")", prefix, jsonText(v, true))
	}

	for key, dst := range map[string]*int{
		"vocab_size": &c.VocabSize, "max_position_embeddings": &c.ContextLength, "hidden_size": &c.Hidden,
		"num_hidden_layers": &c.NLayers, "intermediate_size": &c.FF, "num_attention_heads": &c.Heads,
		"num_key_value_heads": &c.KVHeads, "head_dim": &c.HeadDim, "linear_num_key_heads": &c.LinKeyHeads,
		"linear_num_value_heads": &c.LinValueHeads, "linear_key_head_dim": &c.LinKeyDim,
		"linear_value_head_dim": &c.LinValueDim, "linear_conv_kernel_dim": &c.ConvKernel,
	} {
		v, err := positiveInt(text, key)
		if err != nil {
			return fail("%s%w", prefix, unwrapQwen(err))
		}
		*dst = v
	}

	if err := c.checkSizes(); err != nil { // before the rotary dims and layer types are derived
		return Qwen35Config{}, err
	}
	eps, err := positiveFloat(text, "rms_norm_eps")
	if err != nil {
		return fail("%s%w", prefix, err)
	}
	c.NormEps = eps

	if err := c.readRope(text, prefix); err != nil {
		return Qwen35Config{}, err
	}
	if err := c.readLayerTypes(text, prefix); err != nil {
		return Qwen35Config{}, err
	}
	if c.Tied, err = tieWordEmbeddings(top, text, c.Multimodal); err != nil {
		return Qwen35Config{}, err
	}
	if err := c.Validate(); err != nil {
		return Qwen35Config{}, err
	}
	return c, nil
}

// unwrapQwen strips positiveInt's "octlm: qwen config: " so the key can carry its prefix.
func unwrapQwen(err error) error {
	return fmt.Errorf("%s", strings.TrimPrefix(err.Error(), "octlm: qwen config: "))
}

func wantArchitecture(top map[string]any, want string) error {
	archs, ok := top["architectures"].([]any)
	if !ok || len(archs) != 1 || archs[0] != want {
		v, present := top["architectures"]
		return fmt.Errorf("octlm: qwen3.5 config: unsupported setting: architectures = %s (want [%q])", jsonText(v, present), want)
	}
	return nil
}

// readRope reads rope_parameters (or the older rope_theta and partial_rotary_factor keys):
// only the default rope type; mrope sections are accepted since text positions are equal on
// all three rows, which makes multimodal RoPE plain 1-D RoPE.
func (c *Qwen35Config) readRope(text map[string]any, prefix string) error {
	params := text
	where := prefix
	if p, ok := text["rope_parameters"]; ok && p != nil {
		obj, isObj := p.(map[string]any)
		if !isObj {
			return fmt.Errorf("octlm: qwen3.5 config: %srope_parameters must be an object, got %s", prefix, jsonText(p, true))
		}
		params, where = obj, prefix+"rope_parameters."
		for k := range obj {
			switch k {
			case "rope_type", "rope_theta", "partial_rotary_factor", "mrope_section", "mrope_interleaved", "type":
			default:
				return fmt.Errorf("octlm: qwen3.5 config: unknown setting: %s%s (not implemented by this decoder)", where, k)
			}
		}
	}
	for _, key := range []string{"rope_type", "type"} {
		if t, ok := params[key]; ok && t != "default" {
			return fmt.Errorf("octlm: qwen3.5 config: unsupported setting: %s%s = %s (want \"default\")", where, key, jsonText(t, true))
		}
	}
	theta, err := positiveFloat(params, "rope_theta")
	if err != nil {
		return fmt.Errorf("octlm: qwen3.5 config: %s%w", where, err)
	}
	if theta <= 1 {
		return fmt.Errorf("octlm: qwen3.5 config: %srope_theta must be greater than 1, got %v", where, theta)
	}
	c.RopeTheta = theta
	factor := 1.0
	if _, ok := params["partial_rotary_factor"]; ok {
		if factor, err = positiveFloat(params, "partial_rotary_factor"); err != nil {
			return fmt.Errorf("octlm: qwen3.5 config: %s%w", where, err)
		}
	}
	c.RotaryDim = int(float64(c.HeadDim) * factor) // transformers: int(head_dim * partial_rotary_factor)
	if factor > 1 || c.RotaryDim < 2 || c.RotaryDim%2 != 0 {
		return fmt.Errorf("octlm: qwen3.5 config: %spartial_rotary_factor %v gives %d rotary dims of head_dim %d (want an even number in 2…head_dim)",
			where, factor, c.RotaryDim, c.HeadDim)
	}
	if s, ok := params["mrope_section"]; ok && s != nil {
		list, isList := s.([]any)
		sum := 0
		for _, v := range list {
			n, isNum := v.(json.Number)
			i, err := n.Int64()
			if !isNum || err != nil || i < 0 || i > int64(c.RotaryDim) {
				isList = false
				break
			}
			sum += int(i)
		}
		if !isList || sum != c.RotaryDim/2 {
			return fmt.Errorf("octlm: qwen3.5 config: %smrope_section = %s must be non-negative integers summing to rotary dims / 2 = %d",
				where, jsonText(s, true), c.RotaryDim/2)
		}
	}
	return nil
}

// readLayerTypes reads layer_types, or derives it from full_attention_interval as transformers
// does (every interval-th layer full attention, the others linear).
func (c *Qwen35Config) readLayerTypes(text map[string]any, prefix string) error {
	if v, ok := text["layer_types"]; ok && v != nil {
		list, isList := v.([]any)
		if !isList || len(list) != c.NLayers {
			got := jsonText(v, true)
			if isList {
				got = fmt.Sprintf("%d", len(list)) // not the list: it may be a megabyte long
			}
			return fmt.Errorf("octlm: qwen3.5 config: %slayer_types must list num_hidden_layers = %d types, got %s", prefix, c.NLayers, got)
		}
		for i, t := range list {
			s, _ := t.(string)
			if s != LinearAttention && s != FullAttention {
				return fmt.Errorf("octlm: qwen3.5 config: unsupported setting: %slayer_types[%d] = %s (want %q or %q)",
					prefix, i, jsonText(t, true), LinearAttention, FullAttention)
			}
			c.LayerTypes = append(c.LayerTypes, s)
		}
		return nil
	}
	interval := 4
	if _, ok := text["full_attention_interval"]; ok {
		n, err := positiveInt(text, "full_attention_interval")
		if err != nil {
			return fmt.Errorf("octlm: qwen3.5 config: %s%w", prefix, unwrapQwen(err))
		}
		interval = n
	}
	for i := range c.NLayers {
		if (i+1)%interval == 0 {
			c.LayerTypes = append(c.LayerTypes, FullAttention)
		} else {
			c.LayerTypes = append(c.LayerTypes, LinearAttention)
		}
	}
	return nil
}

// tieWordEmbeddings reads tie_word_embeddings from text_config and the wrapper; where both
// are given they must agree. Absent everywhere, transformers' default for Qwen3.5 is false.
func tieWordEmbeddings(top, text map[string]any, multimodal bool) (bool, error) {
	var found []bool
	places := []map[string]any{text}
	if multimodal {
		places = append(places, top)
	}
	for _, p := range places {
		v, ok := p["tie_word_embeddings"]
		if !ok || v == nil {
			continue
		}
		b, isBool := v.(bool)
		if !isBool {
			return false, fmt.Errorf("octlm: qwen3.5 config: tie_word_embeddings must be true or false, got %s", jsonText(v, true))
		}
		found = append(found, b)
	}
	switch {
	case len(found) == 0:
		return false, fmt.Errorf("octlm: qwen3.5 config: tie_word_embeddings must be given (true or false)")
	case len(found) == 2 && found[0] != found[1]:
		return false, fmt.Errorf("octlm: qwen3.5 config: text_config.tie_word_embeddings = %v disagrees with tie_word_embeddings = %v", found[0], found[1])
	}
	return found[0], nil
}

// Validate reports the first inconsistency of c: sizes outside their bounds (see MaxLayers),
// by their config.json names, first.
func (c Qwen35Config) Validate() error {
	if err := c.checkSizes(); err != nil {
		return err
	}
	switch {
	case c.Heads%c.KVHeads != 0:
		return fmt.Errorf("octlm: qwen3.5 config: num_attention_heads %d is not divisible by num_key_value_heads %d", c.Heads, c.KVHeads)
	case c.LinValueHeads%c.LinKeyHeads != 0:
		return fmt.Errorf("octlm: qwen3.5 config: linear_num_value_heads %d is not divisible by linear_num_key_heads %d", c.LinValueHeads, c.LinKeyHeads)
	case len(c.LayerTypes) != c.NLayers:
		return fmt.Errorf("octlm: qwen3.5 config: %d layer types for %d layers", len(c.LayerTypes), c.NLayers)
	case c.NormEps <= 0 || math.IsNaN(c.NormEps) || math.IsInf(c.NormEps, 0):
		return fmt.Errorf("octlm: qwen3.5 config: rms_norm_eps must be a small positive number, got %v", c.NormEps)
	case c.RotaryDim < 2 || c.RotaryDim > c.HeadDim || c.RotaryDim%2 != 0:
		return fmt.Errorf("octlm: qwen3.5 config: %d rotary dims do not fit head_dim %d", c.RotaryDim, c.HeadDim)
	}
	for i, t := range c.LayerTypes {
		if t != LinearAttention && t != FullAttention {
			return fmt.Errorf("octlm: qwen3.5 config: layer_types[%d] = %q", i, t)
		}
	}
	return nil
}

// checkSizes refuses sizes outside their bounds and projection widths past MaxHeadsWidth,
// naming the fields: what must hold before anything sized by c is made.
func (c Qwen35Config) checkSizes() error {
	fail := func(err error) error { return fmt.Errorf("octlm: qwen3.5 config: %w", err) }
	if err := checkBounds([]sizeBound{
		{"vocab_size", c.VocabSize, MaxVocab}, {"max_position_embeddings", c.ContextLength, MaxContext},
		{"hidden_size", c.Hidden, MaxHidden}, {"num_hidden_layers", c.NLayers, MaxLayers},
		{"intermediate_size", c.FF, MaxIntermediate}, {"num_attention_heads", c.Heads, MaxHeads},
		{"num_key_value_heads", c.KVHeads, MaxHeads}, {"head_dim", c.HeadDim, MaxHeadDim},
		{"linear_num_key_heads", c.LinKeyHeads, MaxHeads}, {"linear_num_value_heads", c.LinValueHeads, MaxHeads},
		{"linear_key_head_dim", c.LinKeyDim, MaxHeadDim}, {"linear_value_head_dim", c.LinValueDim, MaxHeadDim},
		{"linear_conv_kernel_dim", c.ConvKernel, MaxConvKernel},
	}); err != nil {
		return fail(err)
	}
	for _, w := range []struct {
		a  string
		av int
		b  string
		bv int
	}{
		{"2 × num_attention_heads", 2 * c.Heads, "head_dim", c.HeadDim}, // q_proj: the queries and their gates
		{"num_key_value_heads", c.KVHeads, "head_dim", c.HeadDim},
		{"linear_num_key_heads", c.LinKeyHeads, "linear_key_head_dim", c.LinKeyDim},
		{"linear_num_value_heads", c.LinValueHeads, "linear_value_head_dim", c.LinValueDim},
	} {
		if err := checkWidth(w.a, w.av, w.b, w.bv); err != nil {
			return fail(err)
		}
	}
	return nil
}

// Parameters counts the text decoder's parameters (a tied head counted once).
func (c Qwen35Config) Parameters() int64 { return parameterCount(qwen35WeightSpecs(c)) }

// Summary is a one-line description: the layer mix and the head geometry.
func (c Qwen35Config) Summary() string {
	return fmt.Sprintf("Qwen3.5 text decoder: %d layers (%d Gated DeltaNet, %d full attention: %s), hidden %d, attention %d/%d heads × %d (%d rotary), DeltaNet %d key / %d value heads × %d/%d, ff %d, vocab %d, tied head %v",
		c.NLayers, c.CountLayers(LinearAttention), c.CountLayers(FullAttention), layerPattern(c.LayerTypes),
		c.Hidden, c.Heads, c.KVHeads, c.HeadDim, c.RotaryDim, c.LinKeyHeads, c.LinValueHeads, c.LinKeyDim, c.LinValueDim,
		c.FF, c.VocabSize, c.Tied)
}

// layerPattern writes layer types as a compact string: L for linear attention, F for full.
func layerPattern(types []string) string {
	var b strings.Builder
	for _, t := range types {
		if t == FullAttention {
			b.WriteByte('F')
		} else {
			b.WriteByte('L')
		}
	}
	return b.String()
}

// ReadQwen35Config reads and checks a Qwen3.5 config.json file.
func ReadQwen35Config(path string) (Qwen35Config, error) {
	data, err := fileio.ReadFile(path, MaxConfigBytes)
	if err != nil {
		return Qwen35Config{}, fmt.Errorf("octlm: %w", err)
	}
	c, err := Qwen35ConfigFrom(data)
	if err != nil {
		return Qwen35Config{}, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

func decodeJSONObject(data []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var raw map[string]any
	if err := dec.Decode(&raw); err != nil {
		return nil, err
	}
	if raw == nil {
		return nil, fmt.Errorf("null")
	}
	return raw, nil
}

func positiveFloat(raw map[string]any, key string) (float64, error) {
	v, ok := raw[key]
	n, isNum := v.(json.Number)
	if !ok || !isNum {
		return 0, fmt.Errorf("%s must be a positive number, got %s", key, jsonText(v, ok))
	}
	f, err := n.Float64()
	if err != nil || f <= 0 || math.IsInf(f, 0) {
		return 0, fmt.Errorf("%s must be a positive number, got %s", key, n)
	}
	return f, nil
}
