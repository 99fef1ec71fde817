package octlm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"

	"github.com/octlm/octlm/internal/fileio"
)

// qwenSupported lists the Qwen3 settings this decoder implements; any other value is refused.
// A nil value means the key must be absent or null.
var qwenSupported = []struct {
	key   string
	value any
}{
	{"model_type", "qwen3"},
	{"hidden_act", "silu"},
	{"attention_bias", false},
	{"attention_dropout", 0.0},
	{"rope_scaling", nil},
	{"use_sliding_window", false},
	{"rms_norm_eps", 1e-6},
}

// Qwen3ConfigFrom turns a Hugging Face Qwen3 config.json into a Config, refusing every setting the
// decoder does not implement, each with the key named. tie_word_embeddings must be given, true
// (the head reuses embed_tokens) or false (the head is lm_head.weight: UntiedHead).
func Qwen3ConfigFrom(data []byte) (Config, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var raw map[string]any
	if err := dec.Decode(&raw); err != nil {
		return Config{}, fmt.Errorf("octlm: qwen config: not a JSON object: %w", err)
	}
	for _, s := range qwenSupported {
		got, present := raw[s.key]
		if !sameJSONValue(got, s.value) {
			return Config{}, fmt.Errorf("octlm: qwen config: unsupported Qwen setting: %s = %s (want %s)",
				s.key, jsonText(got, present), jsonText(s.value, true))
		}
	}
	var c Config
	for key, dst := range map[string]*int{
		"vocab_size": &c.VocabSize, "max_position_embeddings": &c.ContextLength,
		"hidden_size": &c.DModel, "num_attention_heads": &c.NHeads, "num_hidden_layers": &c.NLayers,
		"num_key_value_heads": &c.KVHeads, "head_dim": &c.HeadDim, "intermediate_size": &c.FFHidden,
	} {
		v, err := positiveInt(raw, key)
		if err != nil {
			return Config{}, err
		}
		*dst = v
	}
	tied, isBool := raw["tie_word_embeddings"].(bool)
	if !isBool {
		v, present := raw["tie_word_embeddings"]
		return Config{}, fmt.Errorf("octlm: qwen config: tie_word_embeddings must be true or false, got %s", jsonText(v, present))
	}
	c.UntiedHead = !tied
	base, err := ropeTheta(raw)
	if err != nil {
		return Config{}, err
	}
	c.RopeBase = base
	c.RopeSplit = true
	c.QKNorm = true
	c.NormEps = 1e-6
	if err := checkWidth("num_attention_heads", c.NHeads, "head_dim", c.HeadDim); err != nil {
		return Config{}, fmt.Errorf("octlm: qwen config: %w", err)
	}
	if c.NHeads%c.KVHeads != 0 {
		return Config{}, fmt.Errorf("octlm: qwen config: num_attention_heads %d is not divisible by num_key_value_heads %d", c.NHeads, c.KVHeads)
	}
	if err := c.Validate(); err != nil {
		return Config{}, fmt.Errorf("octlm: qwen config: %w", err)
	}
	return c, nil
}

// MaxConfigBytes bounds config.json (the Hub's are about 1 KB).
const MaxConfigBytes = 1 << 20

// ReadQwen3Config reads and checks a config.json file: a regular file of at most MaxConfigBytes.
func ReadQwen3Config(path string) (Config, error) {
	data, err := fileio.ReadFile(path, MaxConfigBytes)
	if err != nil {
		return Config{}, fmt.Errorf("octlm: %w", err)
	}
	c, err := Qwen3ConfigFrom(data)
	if err != nil {
		return Config{}, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// ropeTheta reads rope_theta, or the rope_parameters object newer transformers write.
func ropeTheta(raw map[string]any) (float64, error) {
	v, ok := raw["rope_theta"]
	if !ok {
		if params, isObj := raw["rope_parameters"].(map[string]any); isObj {
			if t, hasType := params["rope_type"]; hasType && t != "default" {
				return 0, fmt.Errorf("octlm: qwen config: unsupported Qwen setting: rope_parameters.rope_type = %v", t)
			}
			v, ok = params["rope_theta"]
		}
	}
	n, isNum := v.(json.Number)
	if !ok || !isNum {
		return 0, fmt.Errorf("octlm: qwen config: rope_theta must be a number, got %s", jsonText(v, ok))
	}
	f, err := n.Float64()
	if err != nil || f <= 1 || math.IsInf(f, 0) {
		return 0, fmt.Errorf("octlm: qwen config: rope_theta must be a number greater than 1, got %s", n)
	}
	return f, nil
}

// configBounds are the largest values config.json's size fields may take (see MaxLayers), for
// both architectures; a size field not listed is bounded by math.MaxInt32.
var configBounds = map[string]int{
	"vocab_size": MaxVocab, "max_position_embeddings": MaxContext, "hidden_size": MaxHidden,
	"num_hidden_layers": MaxLayers, "num_attention_heads": MaxHeads, "num_key_value_heads": MaxHeads,
	"head_dim": MaxHeadDim, "intermediate_size": MaxIntermediate, "linear_num_key_heads": MaxHeads,
	"linear_num_value_heads": MaxHeads, "linear_key_head_dim": MaxHeadDim, "linear_value_head_dim": MaxHeadDim,
	"linear_conv_kernel_dim": MaxConvKernel, "full_attention_interval": MaxLayers,
}

// positiveInt reads the size field key: an integer from 1 to its bound (configBounds).
func positiveInt(raw map[string]any, key string) (int, error) {
	v, ok := raw[key]
	n, isNum := v.(json.Number)
	if !ok || !isNum {
		return 0, fmt.Errorf("octlm: qwen config: %s must be a positive integer, got %s", key, jsonText(v, ok))
	}
	i, err := n.Int64()
	if err != nil || i <= 0 {
		return 0, fmt.Errorf("octlm: qwen config: %s must be a positive integer, got %s", key, n)
	}
	bound, ok := configBounds[key]
	if !ok {
		bound = math.MaxInt32
	}
	if i > int64(bound) {
		return 0, fmt.Errorf("octlm: qwen config: %s = %s is beyond the largest this decoder accepts, %d (far above any released model)", key, n, bound)
	}
	return int(i), nil
}

// checkWidth refuses a projection width a × b (heads × head width) past MaxHeadsWidth, naming
// both fields; a and b are each already bounded, so the product cannot overflow.
func checkWidth(aName string, a int, bName string, b int) error {
	if a*b > MaxHeadsWidth {
		return fmt.Errorf("%s × %s = %d × %d = %d is beyond the largest projection width this decoder accepts, %d",
			aName, bName, a, b, a*b, MaxHeadsWidth)
	}
	return nil
}

// sameJSONValue compares a decoded JSON value (numbers as json.Number) with a Go literal.
func sameJSONValue(got, want any) bool {
	switch w := want.(type) {
	case nil:
		return got == nil
	case float64:
		n, ok := got.(json.Number)
		if !ok {
			return false
		}
		f, err := n.Float64()
		return err == nil && f == w
	default:
		return got == want
	}
}

func jsonText(v any, present bool) string {
	if !present {
		return "missing"
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
