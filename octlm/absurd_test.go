package octlm

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/octlm/octlm/xla"
)

// absurdCheckpoint copies a fixture's checkpoint with its config.json edited: edit gets the
// decoder's settings (Qwen3's whole config, Qwen3.5's text_config).
func absurdCheckpoint(t *testing.T, fixture string, edit func(text map[string]any)) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(fixtureDir(fixture), "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	top, err := decodeJSONObject(data)
	if err != nil {
		t.Fatal(err)
	}
	text := top
	if tc, ok := top["text_config"].(map[string]any); ok {
		text = tc
	}
	edit(text)
	return fixtureWithConfig(t, fixture, must(json.Marshal(top)))
}

// set is an edit that gives key the integer n.
func set(key string, n int64) func(map[string]any) {
	return func(text map[string]any) { text[key] = json.Number(strconv.FormatInt(n, 10)) }
}

// TestAbsurdConfigSizes: every size a config declares past its bound (or a product of two
// past MaxHeadsWidth, or layer_types of another length) is refused by every library entry
// point that reads a config, with the field named, without allocating anything proportional
// to it: each refusal allocates under 4 MiB in all.
func TestAbsurdConfigSizes(t *testing.T) {
	const billion = 1_000_000_000
	shared := []struct {
		key   string
		bound int64
	}{
		{"num_hidden_layers", MaxLayers}, {"num_attention_heads", MaxHeads}, {"num_key_value_heads", MaxHeads},
		{"head_dim", MaxHeadDim}, {"intermediate_size", MaxIntermediate}, {"vocab_size", MaxVocab},
		{"max_position_embeddings", MaxContext}, {"hidden_size", MaxHidden},
	}
	qwen35Only := []struct {
		key   string
		bound int64
	}{
		{"linear_num_key_heads", MaxHeads}, {"linear_num_value_heads", MaxHeads}, {"linear_key_head_dim", MaxHeadDim},
		{"linear_value_head_dim", MaxHeadDim}, {"linear_conv_kernel_dim", MaxConvKernel},
	}
	type testCase struct {
		name, fixture string
		edit          func(map[string]any)
		want          string
	}
	var cases []testCase
	for _, fixture := range []string{"tiny-qwen3", "tiny-qwen35"} {
		fields := shared
		if fixture == "tiny-qwen35" {
			fields = append(fields[:len(fields):len(fields)], qwen35Only...)
		}
		for _, f := range fields {
			for _, v := range []int64{f.bound + 1, billion, math.MaxInt64} {
				cases = append(cases, testCase{fmt.Sprint(fixture, "/", f.key, "=", v), fixture, set(f.key, v), f.key})
			}
		}
	}
	cases = append(cases,
		testCase{"tiny-qwen3/heads × head_dim", "tiny-qwen3", func(text map[string]any) {
			set("num_attention_heads", MaxHeads)(text)
			set("head_dim", MaxHeadDim)(text)
		}, "num_attention_heads × head_dim"},
		testCase{"tiny-qwen35/heads × head_dim", "tiny-qwen35", func(text map[string]any) {
			set("num_attention_heads", MaxHeads)(text)
			set("head_dim", MaxHeadDim)(text)
		}, "num_attention_heads × head_dim"},
		testCase{"tiny-qwen35/value heads × value dim", "tiny-qwen35", func(text map[string]any) {
			set("linear_num_value_heads", MaxHeads)(text)
			set("linear_value_head_dim", MaxHeadDim)(text)
		}, "linear_num_value_heads × linear_value_head_dim"},
		testCase{"tiny-qwen35/key heads × key dim", "tiny-qwen35", func(text map[string]any) {
			set("linear_num_key_heads", MaxHeads)(text)
			set("linear_num_value_heads", MaxHeads)(text)
			set("linear_key_head_dim", MaxHeadDim)(text)
		}, "linear_num_key_heads × linear_key_head_dim"},
		// Without layer_types, the types are derived from full_attention_interval, one per layer.
		testCase{"tiny-qwen35/a billion layers, no layer_types", "tiny-qwen35", func(text map[string]any) {
			delete(text, "layer_types")
			set("num_hidden_layers", billion)(text)
		}, "num_hidden_layers"},
		testCase{"tiny-qwen35/full_attention_interval", "tiny-qwen35", func(text map[string]any) {
			delete(text, "layer_types")
			set("full_attention_interval", math.MaxInt64)(text)
		}, "full_attention_interval"},
		testCase{"tiny-qwen35/layer_types longer than the layers", "tiny-qwen35", func(text map[string]any) {
			types := make([]any, 5000)
			for i := range types {
				types[i] = LinearAttention
			}
			text["layer_types"] = types
		}, "layer_types must list num_hidden_layers = 4 types, got 5000"},
		testCase{"tiny-qwen35/mrope_section", "tiny-qwen35", func(text map[string]any) {
			text["rope_parameters"].(map[string]any)["mrope_section"] = []any{json.Number("9223372036854775807"), json.Number("9223372036854775807"), json.Number("2")}
		}, "mrope_section"},
	)
	backend := goBackend(t)
	entries := []struct {
		name string
		call func(dir string) error
	}{
		{"ReadShape", func(dir string) error { _, err := ReadShape(filepath.Join(dir, "config.json")); return err }},
		{"Load", func(dir string) error {
			m, err := Load(dir, LoadOptions{Backend: backend})
			if err == nil {
				m.Close()
			}
			return err
		}},
		{"MemoryNeededDir", func(dir string) error { _, err := MemoryNeededDir(dir, Float32, backend, 100); return err }},
		{"MemoryNeededOn", func(dir string) error { _, err := MemoryNeededOn(dir, BFloat16, xla.EngineONNX, 1<<20); return err }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := absurdCheckpoint(t, c.fixture, c.edit)
			for _, e := range entries {
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				err := e.call(dir)
				runtime.ReadMemStats(&after)
				if err == nil || !strings.Contains(err.Error(), c.want) {
					t.Fatalf("%s: %v, want an error naming %q", e.name, err, c.want)
				}
				if grew := after.TotalAlloc - before.TotalAlloc; grew > 4<<20 {
					t.Errorf("%s: refusing the config allocated %d KiB", e.name, grew>>10)
				}
			}
		})
	}
}

// TestAbsurdConfigStruct: a Config or Qwen35Config built in Go with a size past its bound fails
// Validate naming the field, and MemoryNeededQwen3 gives an estimate no
// memory fits (math.MaxInt64) instead of building its weight table or overflowing.
func TestAbsurdConfigStruct(t *testing.T) {
	tests := []struct {
		field  string
		mutate func(*Config)
	}{
		{"n_layers", func(c *Config) { c.NLayers = 1_000_000_000 }},
		{"vocab_size", func(c *Config) { c.VocabSize = math.MaxInt32 }},
		{"context_length", func(c *Config) { c.ContextLength = math.MaxInt }},
		{"d_model", func(c *Config) { c.DModel = MaxHidden * 2 }},
		{"n_heads", func(c *Config) { c.NHeads, c.KVHeads = MaxHeads*2, 2 }},
		{"kv_heads", func(c *Config) { c.KVHeads = MaxHeads * 4 }},
		{"head_dim", func(c *Config) { c.HeadDim = MaxHeadDim * 2 }},
		{"n_heads × head width", func(c *Config) { c.NHeads, c.HeadDim = MaxHeads, MaxHeadDim }},
		{"ff_hidden", func(c *Config) { c.FFHidden = math.MaxInt32 }},
	}
	for _, tt := range tests {
		t.Run(tt.field, func(t *testing.T) {
			c := classic
			tt.mutate(&c)
			if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tt.field) {
				t.Fatalf("Validate: %v, want an error naming %s", err, tt.field)
			}
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			m := MemoryNeededQwen3(c, BFloat16, goBackend(t), 1<<30)
			runtime.ReadMemStats(&after)
			if m.Weights != math.MaxInt64 || m.Total() != math.MaxInt64 {
				t.Errorf("MemoryNeededQwen3 = %+v (total %d), want math.MaxInt64", m, m.Total())
			}
			if grew := after.TotalAlloc - before.TotalAlloc; grew > 1<<20 {
				t.Errorf("MemoryNeeded allocated %d KiB", grew>>10)
			}
		})
	}
	q, err := ReadQwen35Config(filepath.Join(fixtureDir("tiny-qwen35"), "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	q.NLayers = 1_000_000_000
	if err := q.Validate(); err == nil || !strings.Contains(err.Error(), "num_hidden_layers") {
		t.Errorf("Qwen35Config.Validate: %v, want an error naming num_hidden_layers", err)
	}
}

// TestMemoryBytesSaturate: the estimate's products and sums stop at math.MaxInt64.
func TestMemoryBytesSaturate(t *testing.T) {
	tests := []struct {
		name      string
		got, want int64
	}{
		{"small product", mulBytes(3, 4), 12},
		{"zero", mulBytes(0, math.MaxInt64), 0},
		{"product overflows", mulBytes(1<<32, 1<<32), math.MaxInt64},
		{"sum", addBytes(5, 7), 12},
		{"sum overflows", addBytes(math.MaxInt64-1, 2), math.MaxInt64},
		{"total overflows", Memory{Weights: math.MaxInt64, KVCache: 1, Working: 1}.Total(), math.MaxInt64},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: %d, want %d", tt.name, tt.got, tt.want)
		}
	}
}
