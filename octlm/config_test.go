package octlm

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/octlm/octlm/octlm/synth"
)

// classic is a decoder config from before the five switches existed.
var classic = Config{VocabSize: 8192, ContextLength: 512, DModel: 512, NHeads: 8, NLayers: 8, KVHeads: 4}

func TestFingerprintGolden(t *testing.T) {
	qwen, err := ReadQwen3Config(filepath.Join("..", "testdata", "tiny-qwen3", "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		c    Config
		want string
	}{
		// Pinned: these must never change, or every saved fingerprint breaks.
		{"classic", classic, "59856663dac3fee6"},
		{"classic with explicit defaults", func() Config { c := classic; c.HeadDim, c.FFHidden = 0, 0; return c }(), "59856663dac3fee6"},
		{"tiny qwen3", qwen, "449f35f41ed1abdb"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.c.Fingerprint(); got != tt.want {
				t.Errorf("Fingerprint() = %s, want %s", got, tt.want)
			}
		})
	}
	// A switch at its default must not appear in the fingerprint; a switch turned on must.
	for _, on := range []func(*Config){
		func(c *Config) { c.HeadDim = 32 }, func(c *Config) { c.FFHidden = 1000 }, func(c *Config) { c.RopeBase = 1e6 },
		func(c *Config) { c.RopeSplit = true }, func(c *Config) { c.QKNorm = true }, func(c *Config) { c.UntiedHead = true },
	} {
		c := classic
		on(&c)
		if c.Fingerprint() == classic.Fingerprint() {
			t.Errorf("switch %+v did not change the fingerprint", c)
		}
	}
}

func TestClassicDefaults(t *testing.T) {
	if got := classic.HeadWidth(); got != 64 {
		t.Errorf("HeadWidth = %d, want 512/8", got)
	}
	if got := classic.FFWidth(); got != 1408 { // 8·512/3 = 1365, rounded up to a multiple of 64
		t.Errorf("FFWidth = %d, want 1408", got)
	}
	if classic.Base() != 10_000 || classic.RopeSplit || classic.QKNorm {
		t.Errorf("classic switches are not off: %+v", classic)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		field  string
		mutate func(*Config)
	}{
		{"vocab_size", func(c *Config) { c.VocabSize = 0 }},
		{"context_length", func(c *Config) { c.ContextLength = -1 }},
		{"d_model", func(c *Config) { c.DModel = 0 }},
		{"n_heads", func(c *Config) { c.NHeads = 0 }},
		{"n_layers", func(c *Config) { c.NLayers = 0 }},
		{"kv_heads", func(c *Config) { c.KVHeads = 3 }},
		{"n_heads", func(c *Config) { c.NHeads = 7 }},
		{"head_dim", func(c *Config) { c.HeadDim = -2 }},
		{"head width", func(c *Config) { c.HeadDim = 33 }},
		{"ff_hidden", func(c *Config) { c.FFHidden = -1 }},
		{"rope_base", func(c *Config) { c.RopeBase = 0.5 }},
		{"norm_eps", func(c *Config) { c.NormEps = -1 }},
	}
	if err := classic.Validate(); err != nil {
		t.Fatalf("classic config: %v", err)
	}
	for _, tt := range tests {
		c := classic
		tt.mutate(&c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), tt.field) {
			t.Errorf("%+v: error %v does not name %s", c, err, tt.field)
		}
	}
}

func TestQwenConfig(t *testing.T) {
	base, err := os.ReadFile(filepath.Join("..", "testdata", "tiny-qwen3", "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := Qwen3ConfigFrom(base)
	if err != nil {
		t.Fatal(err)
	}
	want := Config{VocabSize: 320, ContextLength: 40960, DModel: 64, NHeads: 4, NLayers: 2, KVHeads: 2, NormEps: 1e-6,
		HeadDim: 32, FFHidden: 96, RopeBase: 1e6, RopeSplit: true, QKNorm: true}
	if c != want {
		t.Fatalf("Qwen3ConfigFrom = %+v\nwant %+v", c, want)
	}
	untied, err := Qwen3ConfigFrom([]byte(strings.Replace(string(base), `"tie_word_embeddings": true`, `"tie_word_embeddings": false`, 1)))
	if err != nil {
		t.Fatalf("tie_word_embeddings false: %v", err)
	}
	if want.UntiedHead = true; untied != want {
		t.Fatalf("untied Qwen3ConfigFrom = %+v\nwant %+v", untied, want)
	}
	tests := []struct {
		name, from, to, key string
	}{
		{"model type", `"model_type": "qwen3"`, `"model_type": "llama"`, "model_type"},
		{"activation", `"hidden_act": "silu"`, `"hidden_act": "gelu"`, "hidden_act"},
		{"attention bias", `"attention_bias": false`, `"attention_bias": true`, "attention_bias"},
		{"dropout", `"attention_dropout": 0.0`, `"attention_dropout": 0.1`, "attention_dropout"},
		{"rope scaling", `"rope_scaling": null`, `"rope_scaling": {"type": "yarn"}`, "rope_scaling"},
		{"sliding window", `"use_sliding_window": false`, `"use_sliding_window": true`, "use_sliding_window"},
		{"tie as a string", `"tie_word_embeddings": true`, `"tie_word_embeddings": "false"`, "tie_word_embeddings"},
		{"tie null", `"tie_word_embeddings": true`, `"tie_word_embeddings": null`, "tie_word_embeddings"},
		{"tie as a number", `"tie_word_embeddings": true`, `"tie_word_embeddings": 0`, "tie_word_embeddings"},
		{"missing tie", `"tie_word_embeddings": true,`, ``, "tie_word_embeddings"},
		{"eps", `"rms_norm_eps": 1e-06`, `"rms_norm_eps": 1e-05`, "rms_norm_eps"},
		{"zero heads", `"num_attention_heads": 4`, `"num_attention_heads": 0`, "num_attention_heads"},
		{"fractional width", `"hidden_size": 64`, `"hidden_size": 64.5`, "hidden_size"},
		{"string vocab", `"vocab_size": 320`, `"vocab_size": "320"`, "vocab_size"},
		{"heads not divisible", `"num_key_value_heads": 2`, `"num_key_value_heads": 3`, "num_key_value_heads"},
		{"missing head_dim", `"head_dim": 32,`, ``, "head_dim"},
		{"rope theta", `"rope_theta": 1000000`, `"rope_theta": "big"`, "rope_theta"},
		{"not an object", `{`, `[{`, "JSON object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := strings.Replace(string(base), tt.from, tt.to, 1)
			if data == string(base) {
				t.Fatalf("test setup: %q not found in config.json", tt.from)
			}
			_, err := Qwen3ConfigFrom([]byte(data))
			if err == nil || !strings.Contains(err.Error(), tt.key) {
				t.Fatalf("error %v does not name %q", err, tt.key)
			}
		})
	}
}

func TestParameters(t *testing.T) {
	qwen06 := Config{VocabSize: 151936, ContextLength: 40960, DModel: 1024, NHeads: 16, NLayers: 28, KVHeads: 8,
		HeadDim: 128, FFHidden: 3072, RopeBase: 1e6, RopeSplit: true, QKNorm: true, NormEps: 1e-6}
	if got := qwen06.Parameters(); got != 596_049_920 {
		t.Errorf("Qwen3-0.6B parameters = %d, want 596,049,920", got)
	}
	if got := len(qwen3{qwen06}.weights()); got != 310 {
		t.Errorf("Qwen3-0.6B weights = %d, want 310 (311 entries with the tied head copy)", got)
	}
	// Qwen3-8B: untied, 36 layers; the Hub's index says 16,381,470,720 bytes of BF16.
	qwen8 := Config{VocabSize: 151936, ContextLength: 40960, DModel: 4096, NHeads: 32, NLayers: 36, KVHeads: 8,
		HeadDim: 128, FFHidden: 12288, RopeBase: 1e6, RopeSplit: true, QKNorm: true, NormEps: 1e-6, UntiedHead: true}
	if got := qwen8.Parameters(); got != 8_190_735_360 {
		t.Errorf("Qwen3-8B parameters = %d, want 8,190,735,360", got)
	}
	if got := len(qwen3{qwen8}.weights()); got != 36*11+3 {
		t.Errorf("Qwen3-8B weights = %d, want %d (lm_head.weight its own)", got, 36*11+3)
	}
}

func TestInvFreq(t *testing.T) {
	f := InvFreq(128, 1e6)
	if f[0] != 1 {
		t.Errorf("inv_freq[0] = %v, want 1", f[0])
	}
	// 1 / 1e6^(126/128) with float32 rounding at each step as torch does: p = 805842.1875, 1/p.
	// math.Pow's amd64 path (math.Exp) uses FMA where the CPU has it, so the float64 power may
	// differ in its last bit between machines; after rounding to float32 that is at most one
	// float32 step either way.
	want := float32(1.2409378e-06)
	if got := f[63]; got != want && got != math.Nextafter32(want, 0) && got != math.Nextafter32(want, 1) {
		t.Errorf("inv_freq[63] = %v, want %v within one float32 step", got, want)
	}
}

// TestQwenFamily reads the config.json of every synth preset (Qwen3-0.6B to 8B as on the Hub):
// the parameter count and the weights' names agree with the checkpoint synth writes for it, and
// only Qwen3-8B has its own head.
func TestQwenFamily(t *testing.T) {
	for _, name := range synth.LikeNames() {
		t.Run(name, func(t *testing.T) {
			like, err := synth.Like(name)
			if err != nil {
				t.Fatal(err)
			}
			c, err := Qwen3ConfigFrom(like.ConfigJSON())
			if err != nil {
				t.Fatal(err)
			}
			if c.UntiedHead != (name == "qwen3-8b") || c.UntiedHead != like.Untied {
				t.Errorf("UntiedHead %v for %s", c.UntiedHead, name)
			}
			if c.Parameters() != like.UniqueParams() {
				t.Errorf("Parameters %d, synth counts %d", c.Parameters(), like.UniqueParams())
			}
			var stored []string
			for _, s := range like.Tensors() {
				if s.Name != TiedHeadName || c.UntiedHead {
					stored = append(stored, s.Name)
				}
			}
			var names []string
			for _, s := range (qwen3{c}).weights() {
				names = append(names, s.Name)
			}
			slices.Sort(stored)
			slices.Sort(names)
			if !slices.Equal(names, stored) {
				t.Errorf("the model's %d weights differ from the checkpoint's %d tensors", len(names), len(stored))
			}
		})
	}
}
