package octlm

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/core/graph"
	"github.com/gomlx/gomlx/core/tensors"
)

// randomDeltaInputs are inputs of the delta rule as the layer produces them: unit-norm keys
// and queries (the query scaled by 1/√dk), β in (0, 1), log decays g ≤ 0, and a non-zero
// initial state.
func randomDeltaInputs(seqLen, heads, dk, dv int, seed uint64) []*tensors.Tensor {
	r := rand.New(rand.NewPCG(seed, 1))
	unit := func(scale float64) []float32 {
		out := make([]float32, seqLen*heads*dk)
		for i := 0; i < len(out); i += dk {
			var n float64
			for j := range dk {
				v := r.NormFloat64()
				out[i+j] = float32(v)
				n += v * v
			}
			for j := range dk {
				out[i+j] = float32(float64(out[i+j]) / math.Sqrt(n) * scale)
			}
		}
		return out
	}
	fill := func(n int, f func() float64) []float32 {
		out := make([]float32, n)
		for i := range out {
			out[i] = float32(f())
		}
		return out
	}
	return []*tensors.Tensor{
		tensors.FromFlatDataAndDimensions(unit(1/math.Sqrt(float64(dk))), seqLen, heads, dk),
		tensors.FromFlatDataAndDimensions(unit(1), seqLen, heads, dk),
		tensors.FromFlatDataAndDimensions(fill(seqLen*heads*dv, r.NormFloat64), seqLen, heads, dv),
		tensors.FromFlatDataAndDimensions(fill(seqLen*heads, r.Float64), seqLen, heads),
		tensors.FromFlatDataAndDimensions(fill(seqLen*heads, func() float64 { return -2 * r.Float64() }), seqLen, heads),
		tensors.FromFlatDataAndDimensions(fill(heads*dk*dv, func() float64 { return 0.1 * r.NormFloat64() }), heads, dk, dv),
	}
}

// runDelta runs one form of the delta rule and returns its output and final state.
func runDelta(t *testing.T, inputs []*tensors.Tensor, chunk int) (out, state []float32) {
	t.Helper()
	exec, err := graph.NewExec(goBackend(t), func(g *graph.Graph, in []*graph.Node) []*graph.Node {
		var o, s *graph.Node
		if chunk == 0 {
			o, s = recurrentGatedDeltaRule(in[0], in[1], in[2], in[3], in[4], in[5])
		} else {
			o, s = chunkGatedDeltaRule(in[0], in[1], in[2], in[3], in[4], in[5], chunk)
		}
		return []*graph.Node{o, s}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer exec.Finalize()
	args := make([]any, len(inputs))
	for i, x := range inputs {
		args[i] = x
	}
	outs, err := exec.Call(args...)
	if err != nil {
		t.Fatal(err)
	}
	out, err = tensors.CopyFlatData[float32](outs[0])
	if err != nil {
		t.Fatal(err)
	}
	state, err = tensors.CopyFlatData[float32](outs[1])
	if err != nil {
		t.Fatal(err)
	}
	return out, state
}

func maxDiff(a, b []float32) float64 {
	worst := 0.0
	for i := range a {
		d := math.Abs(float64(a[i]) - float64(b[i]))
		if math.IsNaN(d) {
			return math.Inf(1)
		}
		worst = max(worst, d)
	}
	return worst
}

// TestChunkedDeltaRuleMatchesRecurrent holds the chunked parallel form (the nilpotent-product
// inverse of I + A included) to the token-by-token recurrence, from a non-zero state, for
// chunk lengths from 1 (the decode step) to 64 (transformers' chunk size).
func TestChunkedDeltaRuleMatchesRecurrent(t *testing.T) {
	tests := []struct {
		seqLen, heads, dk, dv, chunk int
	}{
		{1, 2, 8, 8, 1},
		{12, 2, 8, 4, 4},
		{48, 3, 16, 16, 16},
		{64, 2, 16, 8, 64},
		{128, 2, 32, 16, 64},
	}
	for i, tt := range tests {
		inputs := randomDeltaInputs(tt.seqLen, tt.heads, tt.dk, tt.dv, uint64(i+1))
		wantOut, wantState := runDelta(t, inputs, 0)
		gotOut, gotState := runDelta(t, inputs, tt.chunk)
		eo, es := maxDiff(gotOut, wantOut), maxDiff(gotState, wantState)
		t.Logf("S=%d heads=%d dk=%d dv=%d chunk=%d: output %.2g, state %.2g", tt.seqLen, tt.heads, tt.dk, tt.dv, tt.chunk, eo, es)
		if eo > 1e-4 || es > 1e-4 {
			t.Errorf("S=%d chunk=%d: chunked differs from recurrent: output %.3g, state %.3g", tt.seqLen, tt.chunk, eo, es)
		}
	}
}

// TestQwen35PaddingKeepsState feeds 5 tokens in one step (padded to 8 rows) and the same 5 one
// at a time: the DeltaNet convolution and recurrent states, and the keys and values, must agree.
// With β or g left non-zero on padding rows, or the convolution state taken from the padded
// end, they differ.
func TestQwen35PaddingKeepsState(t *testing.T) {
	m := loadQwen35Fixture(t, "tiny-qwen35")
	ids := []int{243, 133, 378, 485, 67}
	padded, err := m.NewCache(1)
	if err != nil {
		t.Fatal(err)
	}
	defer padded.Close()
	if _, err := m.ForwardCached(ids, padded); err != nil {
		t.Fatal(err)
	}
	single, err := m.NewCache(1)
	if err != nil {
		t.Fatal(err)
	}
	defer single.Close()
	for _, id := range ids {
		if _, err := m.ForwardCached([]int{id}, single); err != nil {
			t.Fatal(err)
		}
	}
	for i, typ := range m.LayerTypes() {
		for j := range 2 {
			a, err := stateFlat(padded, 2*i+j)
			if err != nil {
				t.Fatal(err)
			}
			b, err := stateFlat(single, 2*i+j)
			if err != nil {
				t.Fatal(err)
			}
			if d := maxDiff(a, b); d > 1e-5 || len(a) != len(b) {
				t.Errorf("layer %d (%s) state %d: padded step and single steps differ by %.3g", i, typ, j, d)
			}
		}
	}
}

// qwen35FixtureConfig returns the fixture's config.json decoded, to be edited by a test.
func qwen35FixtureConfig(t *testing.T) map[string]any {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(fixtureDir("tiny-qwen35"), "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := decodeJSONObject(data)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func TestQwen35ConfigFixture(t *testing.T) {
	c, err := ReadQwen35Config(filepath.Join(fixtureDir("tiny-qwen35"), "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	want := Qwen35Config{VocabSize: 512, ContextLength: 8192, Hidden: 64, NLayers: 4, FF: 96, NormEps: 1e-6,
		Heads: 4, KVHeads: 2, HeadDim: 32, RotaryDim: 8, RopeTheta: 1e7, LinKeyHeads: 2, LinValueHeads: 4,
		LinKeyDim: 16, LinValueDim: 16, ConvKernel: 4, Tied: true, Multimodal: true,
		LayerTypes: []string{LinearAttention, LinearAttention, LinearAttention, FullAttention}}
	if got, _ := json.Marshal(c); string(got) != string(must(json.Marshal(want))) {
		t.Errorf("config\n got %s\nwant %s", got, must(json.Marshal(want)))
	}
	if c.WeightPrefix() != "model.language_model." || c.ConvDim() != 2*32+64 {
		t.Errorf("prefix %q conv dim %d", c.WeightPrefix(), c.ConvDim())
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestQwen35ConfigForms: the text-only form (qwen3_5_text at the top, weights under model.)
// and a config without layer_types (derived from full_attention_interval) are read.
func TestQwen35ConfigForms(t *testing.T) {
	raw := qwen35FixtureConfig(t)
	text := raw["text_config"].(map[string]any)
	text["architectures"] = []any{"Qwen3_5ForCausalLM"}
	c, err := Qwen35ConfigFrom(must(json.Marshal(text)))
	if err != nil {
		t.Fatalf("text-only form: %v", err)
	}
	if c.Multimodal || c.WeightPrefix() != "model." || !c.Tied {
		t.Errorf("text-only form read as %+v", c)
	}
	delete(text, "layer_types")
	text["full_attention_interval"] = json.Number("2")
	c, err = Qwen35ConfigFrom(must(json.Marshal(text)))
	if err != nil {
		t.Fatal(err)
	}
	if got := layerPattern(c.LayerTypes); got != "LFLF" {
		t.Errorf("layer types from full_attention_interval 2: %s, want LFLF", got)
	}
}

// TestQwen35ConfigRefusals: every unsupported setting is refused with its key named.
func TestQwen35ConfigRefusals(t *testing.T) {
	tests := []struct {
		name string
		edit func(top, text map[string]any)
		want string
	}{
		{"moe model type", func(top, _ map[string]any) { top["model_type"] = "qwen3_5_moe" }, "mixture-of-experts"},
		{"experts", func(_, text map[string]any) { text["num_experts"] = json.Number("8") }, "text_config.num_experts"},
		{"sliding window", func(_, text map[string]any) { text["use_sliding_window"] = true }, "text_config.use_sliding_window"},
		{"sliding window size", func(_, text map[string]any) { text["sliding_window"] = json.Number("4096") }, "text_config.sliding_window"},
		{"rope type", func(_, text map[string]any) {
			text["rope_parameters"].(map[string]any)["rope_type"] = "yarn"
		}, "rope_parameters.rope_type"},
		{"rope scaling", func(_, text map[string]any) { text["rope_scaling"] = map[string]any{"factor": 2} }, "text_config.rope_scaling"},
		{"no output gate", func(_, text map[string]any) { text["attn_output_gate"] = false }, "attn_output_gate"},
		{"activation", func(_, text map[string]any) { text["hidden_act"] = "gelu" }, "hidden_act"},
		{"bias", func(_, text map[string]any) { text["attention_bias"] = true }, "attention_bias"},
		{"unknown layer type", func(_, text map[string]any) {
			text["layer_types"].([]any)[1] = "sliding_attention"
		}, "layer_types[1]"},
		{"layer types length", func(_, text map[string]any) {
			text["layer_types"] = text["layer_types"].([]any)[:3]
		}, "layer_types"},
		{"value heads", func(_, text map[string]any) { text["linear_num_value_heads"] = json.Number("3") }, "linear_num_value_heads"},
		{"missing head_dim", func(_, text map[string]any) { delete(text, "head_dim") }, "text_config.head_dim"},
		{"rotary factor", func(_, text map[string]any) {
			text["rope_parameters"].(map[string]any)["partial_rotary_factor"] = json.Number("0.3")
		}, "partial_rotary_factor"},
		{"mrope sections", func(_, text map[string]any) {
			text["rope_parameters"].(map[string]any)["mrope_section"] = []any{json.Number("3"), json.Number("1"), json.Number("1")}
		}, "mrope_section"},
		{"ssm dtype", func(_, text map[string]any) { text["mamba_ssm_dtype"] = "bfloat16" }, "mamba_ssm_dtype"},
		{"unknown key", func(_, text map[string]any) { text["qk_layernorm_style"] = "new" }, "text_config.qk_layernorm_style"},
		{"tie disagreement", func(top, _ map[string]any) { top["tie_word_embeddings"] = false }, "tie_word_embeddings"},
		{"architecture", func(top, _ map[string]any) { top["architectures"] = []any{"Qwen3_5ForCausalLM"} }, "architectures"},
		{"no text_config", func(top, _ map[string]any) { delete(top, "text_config") }, "text_config"},
		{"eps", func(_, text map[string]any) { text["rms_norm_eps"] = json.Number("-1") }, "rms_norm_eps"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			top := qwen35FixtureConfig(t)
			tt.edit(top, top["text_config"].(map[string]any))
			_, err := Qwen35ConfigFrom(must(json.Marshal(top)))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one naming %q", err, tt.want)
			}
		})
	}
}

// TestQwen35Checkpoint: the fixture's vision and MTP tensors are counted and skipped; a config
// that disagrees with the header is refused naming the tensor.
func TestQwen35Checkpoint(t *testing.T) {
	m := loadQwen35Fixture(t, "tiny-qwen35")
	q, _ := m.arch.(qwen35)
	if got, want := len(m.weights), len(qwen35WeightSpecs(q.c)); got != want || q.c.NLayers != 4 {
		t.Errorf("%d resident weights, want %d", got, want)
	}

	dir := t.TempDir()
	model, err := os.ReadFile(filepath.Join(fixtureDir("tiny-qwen35"), "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "model.safetensors"), model, 0o644); err != nil {
		t.Fatal(err)
	}
	top := qwen35FixtureConfig(t)
	top["text_config"].(map[string]any)["intermediate_size"] = json.Number("128")
	if err := os.WriteFile(filepath.Join(dir, "config.json"), must(json.Marshal(top)), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Load(dir, LoadOptions{Backend: goBackend(t)})
	if err == nil || !strings.Contains(err.Error(), "mlp.") {
		t.Errorf("intermediate_size 128 against a header of 96: error %v, want one naming an mlp tensor", err)
	}
	top["text_config"].(map[string]any)["intermediate_size"] = json.Number("96")
	top["text_config"].(map[string]any)["layer_types"] = []any{FullAttention, LinearAttention, LinearAttention, FullAttention}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), must(json.Marshal(top)), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Load(dir, LoadOptions{Backend: goBackend(t)})
	if err == nil || !strings.Contains(err.Error(), "layers.0.") {
		t.Errorf("layer_types naming layer 0 full attention: error %v, want one naming a layers.0 tensor", err)
	}
}

// TestUnitLowerInverse: for strictly lower triangular A, (I + A)·unitLowerInverse(A) is the
// identity, for every chunk length the decoder and the test above use.
func TestUnitLowerInverse(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	for _, c := range []int{1, 2, 4, 16, 64} {
		a := make([]float32, 3*c*c)
		for b := range 3 {
			for i := range c {
				for j := range i {
					a[b*c*c+i*c+j] = float32(0.6 * (2*r.Float64() - 1))
				}
			}
		}
		exec, err := graph.NewExec(goBackend(t), func(g *graph.Graph, in []*graph.Node) []*graph.Node {
			return []*graph.Node{unitLowerInverse(in[0], c)}
		})
		if err != nil {
			t.Fatal(err)
		}
		outs, err := exec.Call(tensors.FromFlatDataAndDimensions(a, 3, c, c))
		exec.Finalize()
		if err != nil {
			t.Fatal(err)
		}
		inv, err := tensors.CopyFlatData[float32](outs[0])
		if err != nil {
			t.Fatal(err)
		}
		worst := 0.0
		for b := range 3 {
			for i := range c {
				for j := range c {
					sum := float64(inv[b*c*c+i*c+j]) // the I of I + A
					for k := range i {
						sum += float64(a[b*c*c+i*c+k]) * float64(inv[b*c*c+k*c+j])
					}
					want := 0.0
					if i == j {
						want = 1
					}
					worst = max(worst, math.Abs(sum-want))
				}
			}
		}
		t.Logf("C=%d: max |(I+A)·inv − I| = %.2g", c, worst)
		if worst > 1e-4 {
			t.Errorf("C=%d: (I+A)·inverse differs from I by %.3g", c, worst)
		}
	}
}

// TestQwen35CacheSize: a DeltaNet layer's state is its convolution state and its float32
// recurrent state, the same bytes after 1 and after 1,000 positions; only the full-attention
// layers' keys and values grow with the context.
func TestQwen35CacheSize(t *testing.T) {
	m := loadQwen35Fixture(t, "tiny-qwen35")
	c := m.arch.(qwen35).c
	linear := int64(c.CountLayers(LinearAttention))
	wantFixed := linear * 4 * int64((c.ConvKernel-1)*c.ConvDim()+c.LinValueHeads*c.LinKeyDim*c.LinValueDim)
	wantPerPos := int64(c.CountLayers(FullAttention)) * 2 * int64(c.KVHeads*c.HeadDim) * 4
	ids := readReference(t, "tiny-qwen35")[4].ids
	cache, err := m.NewCache(1)
	if err != nil {
		t.Fatal(err)
	}
	defer cache.Close()
	for _, n := range []int{1, len(ids)} {
		if _, err := m.ForwardCached(ids[cache.Len():n], cache); err != nil {
			t.Fatal(err)
		}
		if got := cache.FixedBytes(); got != wantFixed {
			t.Errorf("after %d positions: fixed state %d bytes, want %d", n, got, wantFixed)
		}
		if got := cache.BytesPerPosition(); got != wantPerPos {
			t.Errorf("after %d positions: %d bytes per position, want %d (full-attention layers only)", n, got, wantPerPos)
		}
	}
	if cache.CanTruncate() {
		t.Error("a cache holding a recurrent state claims it can be truncated")
	}
}
