package parity

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/octlm/octlm/loader"
)

// qwen35Fixture is what testdata/README.md promises about one Qwen3.5 fixture.
type qwen35Fixture struct {
	name    string
	sharded bool
	tied    bool
}

var qwen35FixtureTable = []qwen35Fixture{
	{name: "tiny-qwen35", tied: true},
	{name: "tiny-qwen35-sharded", sharded: true},
	{name: "tiny-qwen35-wide", tied: true},
	{name: "tiny-qwen35-grouped", sharded: true},
}

// qwen35TextConfig is the part of a fixture's config.json these checks read.
type qwen35TextConfig struct {
	Architectures []string `json:"architectures"`
	TextConfig    struct {
		VocabSize  int      `json:"vocab_size"`
		Hidden     int      `json:"hidden_size"`
		Layers     int      `json:"num_hidden_layers"`
		LayerTypes []string `json:"layer_types"`
		Tie        bool     `json:"tie_word_embeddings"`
	} `json:"text_config"`
}

// TestQwen35FixtureLayout checks that every Qwen3.5 fixture has the layout of the Hub's
// multimodal files that the decoder's tests rely on: text weights under model.language_model,
// BF16 except an F32 linear_attn.norm.weight, dummy vision and MTP tensors, the head its config
// names, and sharding where the README says.
func TestQwen35FixtureLayout(t *testing.T) {
	for _, fx := range qwen35FixtureTable {
		t.Run(fx.name, func(t *testing.T) {
			dir := filepath.Join("..", "testdata", fx.name)
			cfg := readQwen35Config(t, dir)
			if !slices.Equal(cfg.Architectures, []string{"Qwen3_5ForConditionalGeneration"}) {
				t.Errorf("architectures %v, want the multimodal wrapper", cfg.Architectures)
			}
			tc := cfg.TextConfig
			if len(tc.LayerTypes) != tc.Layers {
				t.Fatalf("%d layer types for %d layers", len(tc.LayerTypes), tc.Layers)
			}
			if tc.Tie != fx.tied {
				t.Errorf("tie_word_embeddings %v, want %v", tc.Tie, fx.tied)
			}
			ck, err := loader.OpenCheckpoint(dir)
			if err != nil {
				t.Fatal(err)
			}
			if ck.Sharded() != fx.sharded {
				t.Errorf("sharded %v, want %v", ck.Sharded(), fx.sharded)
			}
			var visual, mtp, text int
			for e, err := range ck.Tensors() {
				if err != nil {
					t.Fatal(err)
				}
				name := e.Info.Name
				switch {
				case strings.HasPrefix(name, "model.visual."):
					visual++
				case strings.HasPrefix(name, "mtp."):
					mtp++
				case strings.HasPrefix(name, "model.language_model."), name == "lm_head.weight":
					text++
					want := loader.BF16
					if strings.HasSuffix(name, ".linear_attn.norm.weight") {
						want = loader.F32
					}
					if e.Info.DType != want {
						t.Errorf("%s: dtype %s, want %s", name, e.Info.DType, want)
					}
				default:
					t.Errorf("unexpected tensor %s", name)
				}
			}
			if visual == 0 || mtp == 0 || text == 0 {
				t.Errorf("tensors: %d visual, %d mtp, %d text; want some of each", visual, mtp, text)
			}
			if _, ok := ck.Lookup("lm_head.weight"); ok == fx.tied {
				t.Errorf("lm_head.weight stored: %v, tied: %v", ok, fx.tied)
			}
			for i, kind := range tc.LayerTypes {
				probe := map[string]string{
					"linear_attention": "linear_attn.A_log",
					"full_attention":   "self_attn.q_proj.weight",
				}[kind]
				if probe == "" {
					t.Fatalf("layer %d: layer type %q", i, kind)
				}
				name := "model.language_model.layers." + strconv.Itoa(i) + "." + probe
				if _, ok := ck.Lookup(name); !ok {
					t.Errorf("layer %d is %s but %s is missing", i, kind, name)
				}
			}
		})
	}
}

// TestQwen35ReferenceFolders checks each fixture's reference folder: ReadReference takes it whole
// without warnings (the activation dumps beside the logits are not mistaken for them), its cases
// are cases.json's, and every case has an activation dump of shape [layers+1, T, hidden] whose
// first row is the case's embedding rows exactly (BF16 weights upcast, float64 math rounded to
// float32 changes nothing there), with the config's layer types in its metadata.
func TestQwen35ReferenceFolders(t *testing.T) {
	for _, fx := range qwen35FixtureTable {
		t.Run(fx.name, func(t *testing.T) {
			dir := filepath.Join("..", "testdata", fx.name)
			tc := readQwen35Config(t, dir).TextConfig
			var cases [][]int
			data, err := os.ReadFile(filepath.Join(dir, "cases.json"))
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(data, &cases); err != nil {
				t.Fatal(err)
			}
			ref, err := ReadReference(filepath.Join(dir, "reference"))
			if err != nil {
				t.Fatal(err)
			}
			if len(ref.Warnings) != 0 {
				t.Errorf("warnings: %v", ref.Warnings)
			}
			if ref.Vocab != tc.VocabSize || len(ref.Cases) != len(cases) {
				t.Fatalf("reference: vocab %d, %d cases; want %d, %d", ref.Vocab, len(ref.Cases), tc.VocabSize, len(cases))
			}
			ck, err := loader.OpenCheckpoint(dir)
			if err != nil {
				t.Fatal(err)
			}
			embed, ok := ck.Lookup("model.language_model.embed_tokens.weight")
			if !ok {
				t.Fatal("no embed_tokens")
			}
			table := make([]float32, embed.Info.NumElements())
			if err := embed.File.ReadFloat32(embed.Info, table); err != nil {
				t.Fatal(err)
			}
			for n, c := range ref.Cases {
				if !slices.Equal(c.IDs, cases[n]) {
					t.Errorf("case %d: reference ids differ from cases.json", n)
				}
				f, err := loader.Open(filepath.Join(dir, "reference", "reference-activations-"+strconv.Itoa(n)+".safetensors"))
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				if got := f.Metadata()["layer_types"]; got != strings.Join(tc.LayerTypes, ",") {
					t.Errorf("case %d: metadata layer_types %q", n, got)
				}
				h, ok := f.Lookup("hidden")
				T := len(c.IDs)
				if !ok || h.DType != loader.F32 || !slices.Equal(h.Shape, []int{tc.Layers + 1, T, tc.Hidden}) {
					t.Fatalf("case %d: hidden %v %v, want F32 [%d %d %d]", n, h.DType, h.Shape, tc.Layers+1, T, tc.Hidden)
				}
				first := make([]float32, T*tc.Hidden)
				if err := f.ReadFloat32Range(h, 0, first); err != nil {
					t.Fatal(err)
				}
				for p, id := range c.IDs {
					row := table[id*tc.Hidden : (id+1)*tc.Hidden]
					if !slices.Equal(first[p*tc.Hidden:(p+1)*tc.Hidden], row) {
						t.Fatalf("case %d position %d: hidden[0] is not embed_tokens row %d", n, p, id)
					}
				}
			}
		})
	}
}

func readQwen35Config(t *testing.T, dir string) qwen35TextConfig {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg qwen35TextConfig
	if err := json.Unmarshal(data, &cfg); err != nil {
		t.Fatalf("%s/config.json: %v", dir, err)
	}
	return cfg
}
