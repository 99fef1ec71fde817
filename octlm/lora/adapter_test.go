package lora

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/octlm/octlm/loader"
)

const (
	tinyModel   = "../../testdata/tiny-qwen3"
	tinyAdapter = "../../testdata/tiny-qwen3-finetune/lora/init-adapter"
)

// checkpointLinears lists the *_proj weights of a Qwen3 checkpoint as Linears (what the
// decoder's weight table says, read here from the file for a test that needs no graph).
func checkpointLinears(t *testing.T, dir string) []Linear {
	t.Helper()
	ck, err := loader.OpenCheckpoint(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	var out []Linear
	for e, err := range ck.Tensors() {
		if err != nil {
			t.Fatal(err)
		}
		if module, ok := strings.CutSuffix(e.Info.Name, "_proj.weight"); ok {
			out = append(out, Linear{Name: e.Info.Name, Module: module + "_proj", Out: e.Info.Shape[0], In: e.Info.Shape[1]})
		}
	}
	return out
}

func TestReadValidateWrite(t *testing.T) {
	a, err := Read(tinyAdapter)
	if err != nil {
		t.Fatal(err)
	}
	if a.Config.R != 4 || a.Config.Scale() != 2 || len(a.Modules) != 14 {
		t.Fatalf("r %d scale %v modules %d, want 4, 2, 14", a.Config.R, a.Config.Scale(), len(a.Modules))
	}
	linears := checkpointLinears(t, tinyModel)
	if err := a.Validate(linears); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := a.Write(dir); err != nil {
		t.Fatal(err)
	}
	b, err := Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	for module, m := range a.Modules {
		n := b.Modules[module]
		for i := range m.A {
			if m.A[i] != n.A[i] {
				t.Fatalf("%s: A[%d] %v after a round trip, was %v", module, i, n.A[i], m.A[i])
			}
		}
		for i := range m.B {
			if m.B[i] != n.B[i] {
				t.Fatalf("%s: B[%d] %v after a round trip, was %v", module, i, n.B[i], m.B[i])
			}
		}
	}
	f, err := loader.Open(filepath.Join(dir, WeightsFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Metadata()["format"] != "pt" {
		t.Errorf("metadata %v, want format pt", f.Metadata())
	}
	if _, ok := f.Lookup("base_model.model.model.layers.1.mlp.down_proj.lora_B.weight"); !ok {
		t.Error("no PEFT-named lora_B for layer 1's down_proj")
	}
}

// editedAdapter copies the fixture adapter into a temporary folder with edit applied to its
// configuration.
func editedAdapter(t *testing.T, edit func(cfg map[string]any)) string {
	t.Helper()
	dir := t.TempDir()
	data, err := os.ReadFile(filepath.Join(tinyAdapter, ConfigFile))
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(data, &cfg); err != nil {
		t.Fatal(err)
	}
	edit(cfg)
	data, _ = json.Marshal(cfg)
	if err := os.WriteFile(filepath.Join(dir, ConfigFile), data, 0o644); err != nil {
		t.Fatal(err)
	}
	w, err := os.ReadFile(filepath.Join(tinyAdapter, WeightsFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, WeightsFile), w, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestRefused(t *testing.T) {
	linears := checkpointLinears(t, tinyModel)
	tests := []struct {
		name string
		edit func(map[string]any)
		want string
	}{
		{"DoRA", func(c map[string]any) { c["use_dora"] = true }, "use_dora (DoRA)"},
		{"modules_to_save", func(c map[string]any) { c["modules_to_save"] = []string{"lm_head"} }, "modules_to_save"},
		{"layers_to_transform", func(c map[string]any) { c["layers_to_transform"] = []int{0} }, "layers_to_transform"},
		{"bias", func(c map[string]any) { c["bias"] = "all" }, `bias "all"`},
		{"regex targets", func(c map[string]any) { c["target_modules"] = ".*q_proj" }, "regular expression"},
		{"prefix tuning", func(c map[string]any) { c["peft_type"] = "PREFIX_TUNING" }, "peft_type"},
		{"rank pattern", func(c map[string]any) { c["rank_pattern"] = map[string]int{"q_proj": 8} }, "rank_pattern"},
		{"unknown target", func(c map[string]any) { c["target_modules"] = []string{"q_proj", "qkv_proj"} }, `"qkv_proj" matches none`},
		{"fewer targets than tensors", func(c map[string]any) { c["target_modules"] = []string{"q_proj"} }, "not a Linear of the model that target_modules"},
		{"rank mismatch", func(c map[string]any) { c["r"] = 8 }, "are not [r, in] and [out, r] with r 8"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, err := Read(editedAdapter(t, tc.edit))
			if err == nil {
				err = a.Validate(linears)
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
	pickle := editedAdapter(t, func(map[string]any) {})
	if err := os.Rename(filepath.Join(pickle, WeightsFile), filepath.Join(pickle, "adapter_model.bin")); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(pickle); err == nil || !strings.Contains(err.Error(), "adapter_model.bin, a pickle") {
		t.Errorf("a pickled adapter: %v", err)
	}
	a, err := Read(tinyAdapter)
	if err != nil {
		t.Fatal(err)
	}
	short := append([]Linear(nil), linears...)
	short[0].In++
	if err := a.Validate(short); err == nil || !strings.Contains(err.Error(), "for the model's weight") {
		t.Errorf("a shape mismatch: %v", err)
	}
}

func TestTargeted(t *testing.T) {
	linears := []Linear{
		{Name: "model.layers.0.self_attn.q_proj.weight", Module: "model.layers.0.self_attn.q_proj"},
		{Name: "model.layers.0.mlp.down_proj.weight", Module: "model.layers.0.mlp.down_proj"},
		{Name: "lm_head.weight", Module: "lm_head"},
	}
	got, err := Targeted(linears, []string{AllLinear})
	if err != nil || len(got) != 2 {
		t.Fatalf("all-linear: %v %v, want the two projections", got, err)
	}
	got, err = Targeted(linears, []string{"down_proj"})
	if err != nil || len(got) != 1 || got[0].Module != "model.layers.0.mlp.down_proj" {
		t.Fatalf("down_proj: %v %v", got, err)
	}
}

func TestMerge(t *testing.T) {
	a, err := Read(tinyAdapter)
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	linears := checkpointLinears(t, tinyModel)
	if err := Merge(tinyModel, out, a, linears, 0); err != nil {
		t.Fatal(err)
	}
	base, err := loader.OpenCheckpoint(tinyModel)
	if err != nil {
		t.Fatal(err)
	}
	defer base.Close()
	merged, err := loader.OpenCheckpoint(out)
	if err != nil {
		t.Fatal(err)
	}
	defer merged.Close()
	if merged.Len() != base.Len() {
		t.Fatalf("%d tensors merged, %d in the base", merged.Len(), base.Len())
	}
	for _, name := range []string{"model.layers.1.self_attn.q_proj.weight", "model.layers.0.mlp.down_proj.weight", "model.norm.weight"} {
		eb, _ := base.Lookup(name)
		em, ok := merged.Lookup(name)
		if !ok || em.Info.DType != eb.Info.DType {
			t.Fatalf("%s: missing or of another dtype in the merged checkpoint", name)
		}
		w := make([]float32, eb.Info.NumElements())
		got := make([]float32, len(w))
		if err := eb.File.ReadFloat32(eb.Info, w); err != nil {
			t.Fatal(err)
		}
		if err := em.File.ReadFloat32(em.Info, got); err != nil {
			t.Fatal(err)
		}
		module, isLinear := strings.CutSuffix(name, ".weight")
		m, targeted := a.Modules[module]
		worst := 0.0
		for i := range w {
			want := float64(w[i])
			if isLinear && targeted {
				o, in := i/m.In, i%m.In
				var d float64
				for r := range m.Rank {
					d += float64(m.B[o*m.Rank+r]) * float64(m.A[r*m.In+in])
				}
				want += a.Config.Scale() * d
			}
			// bfloat16 keeps 8 bits: one rounding is within 2^-8 of the value.
			worst = max(worst, math.Abs(float64(got[i])-want)/max(math.Abs(want), 1e-3))
		}
		if worst > 1.0/256 {
			t.Errorf("%s: relative error %.3g, more than one bfloat16 rounding", name, worst)
		}
	}
	if _, err := os.Stat(filepath.Join(out, "config.json")); err != nil {
		t.Errorf("config.json not copied: %v", err)
	}
}

func TestToLoRARoundTrip(t *testing.T) {
	a, err := Read(tinyAdapter)
	if err != nil {
		t.Fatal(err)
	}
	linears := checkpointLinears(t, tinyModel)
	l, err := a.ToLoRA(linears)
	if err != nil {
		t.Fatal(err)
	}
	if l.Scale != 2 || len(l.Modules) != 14 {
		t.Fatalf("scale %v, %d modules; want 2 and 14", l.Scale, len(l.Modules))
	}
	if _, ok := l.Modules["model.layers.0.self_attn.q_proj.weight"]; !ok {
		t.Fatal("not keyed by the checkpoint's weight names")
	}
	b, err := FromLoRA(a.Config, l, linears)
	if err != nil {
		t.Fatal(err)
	}
	for module, m := range a.Modules {
		if n := b.Modules[module]; &n.A[0] != &m.A[0] || n.Rank != m.Rank {
			t.Errorf("%s: not the same matrices after the round trip", module)
		}
	}
	other := a.Config
	other.LoraAlpha = 4
	if _, err := FromLoRA(other, l, linears); err == nil {
		t.Error("a configuration of another scale was accepted")
	}
}
