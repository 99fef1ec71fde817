package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/octlm/octlm/internal/units"
	"github.com/octlm/octlm/loader"
	"github.com/octlm/octlm/octlm/synth"
)

// synthDir writes a small random Qwen3 checkpoint (no tokenizer) and returns its folder.
func synthDir(t *testing.T, layers int) (string, synth.QwenLike) {
	t.Helper()
	cfg := synth.Tiny()
	cfg.NumLayers = layers
	dir := t.TempDir()
	var out, errOut bytes.Buffer
	err := runSynth([]string{"--like", "tiny", "--layers", strconv.Itoa(layers), "--out", dir, "--seed", "3", "--no-tokenizer"}, &out, &errOut)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), units.Commas(cfg.UniqueParams())) {
		t.Errorf("synth summary %q lacks the unique parameter count", out.String())
	}
	return dir, cfg
}

func TestInspectSynth(t *testing.T) {
	dir, cfg := synthDir(t, 3)
	var out bytes.Buffer
	if err := runInspect([]string{"--json", dir}, &out, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	var r inspectReport
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	specs := cfg.Tensors()
	if r.Entries != len(specs) || r.UniqueParams != cfg.UniqueParams() {
		t.Errorf("entries %d unique %d, want %d and %d", r.Entries, r.UniqueParams, len(specs), cfg.UniqueParams())
	}
	embed := int64(cfg.VocabSize * cfg.HiddenSize)
	if r.Params-r.UniqueParams != embed || len(r.Tied) != 1 {
		t.Errorf("params %d, unique %d, tied %v: want the lm_head copy (%d) counted once", r.Params, r.UniqueParams, r.Tied, embed)
	}
	size, _ := cfg.ModelFileSize()
	st, _ := os.Stat(filepath.Join(dir, "model.safetensors"))
	if st.Size() != size || r.Bytes != 2*r.Params {
		t.Errorf("file %d bytes (want %d), tensor bytes %d for %d BF16 params", st.Size(), size, r.Bytes, r.Params)
	}

	out.Reset()
	if err := runInspect([]string{"--tensors", filepath.Join(dir, "model.safetensors")}, &out, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for _, want := range []string{"model.layers.2.mlp.down_proj.weight", "BF16", "[64, 96]", "unique params:  " + units.Commas(cfg.UniqueParams()), "tied copies counted once"} {
		if !strings.Contains(text, want) {
			t.Errorf("table lacks %q:\n%s", want, text)
		}
	}
}

// A stored lm_head that differs from the embedding is not a tied copy: counted in full.
func TestInspectUntied(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "model.safetensors")
	err := loader.WriteFile(p, []loader.WriteTensor{
		{Name: "model.embed_tokens.weight", DType: loader.BF16, Shape: []int{2, 2}, Data: make([]byte, 8)},
		{Name: "lm_head.weight", DType: loader.BF16, Shape: []int{2, 2}, Data: []byte{1, 0, 0, 0, 0, 0, 0, 0}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := inspectPath(t.Context(), p, true, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if r.UniqueParams != 8 || len(r.Tied) != 0 {
		t.Errorf("unique %d tied %v, want 8 and none", r.UniqueParams, r.Tied)
	}
}

func TestInspectRejects(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.safetensors")
	os.WriteFile(bad, []byte("\x10\x00\x00\x00\x00\x00\x00\x00[1,2,3,4,5,6,7,8]"), 0o644)
	err := runInspect([]string{bad}, &bytes.Buffer{}, &bytes.Buffer{})
	if !errors.Is(err, loader.ErrFormat) || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), string(loader.RuleNotObject)) {
		t.Errorf("malformed file: %v", err)
	}
	if code := run([]string{"inspect", bad}); code != 2 {
		t.Errorf("exit %d for a malformed file, want 2", code)
	}
	t.Setenv("HF_HUB_CACHE", t.TempDir())
	if err := runInspect([]string{"--offline", "Nobody/none"}, &bytes.Buffer{}, &bytes.Buffer{}); err == nil {
		t.Error("offline Hub name missing from the cache: no error")
	}
	var ue usageError
	if err := runInspect(nil, &bytes.Buffer{}, &bytes.Buffer{}); !errors.As(err, &ue) {
		t.Errorf("no PATH: %v, want a usage error", err)
	}
}

func TestManifestCommand(t *testing.T) {
	dir, _ := synthDir(t, 1)
	var out bytes.Buffer
	if err := runManifest([]string{dir}, &out, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "model.safetensors") || !strings.Contains(out.String(), "config.json") {
		t.Errorf("manifest output %q", out.String())
	}
	out.Reset()
	if err := runManifest([]string{"--verify", dir}, &out, &bytes.Buffer{}); err != nil || !strings.Contains(out.String(), "ok:") {
		t.Fatalf("verify: %v %q", err, out.String())
	}
	// Flip one byte of the model: the check fails (exit 1), naming the file.
	p := filepath.Join(dir, "model.safetensors")
	data, _ := os.ReadFile(p)
	data[len(data)-1] ^= 1
	os.WriteFile(p, data, 0o644)
	err := runManifest([]string{"--verify", dir}, &out, &bytes.Buffer{})
	if !errors.Is(err, errCheckFailed) || !strings.Contains(err.Error(), "model.safetensors") {
		t.Errorf("corrupt file: %v", err)
	}
	if code := run([]string{"manifest", "--verify", dir}); code != 1 {
		t.Errorf("exit %d for a failed verification, want 1", code)
	}
	// Nothing to verify against is bad input, not a failed check.
	if err := runManifest([]string{"--verify", t.TempDir()}, &out, &bytes.Buffer{}); err == nil || errors.Is(err, errCheckFailed) {
		t.Errorf("no manifest: %v", err)
	}
	// So is a manifest file that is not a manifest.
	bad := t.TempDir()
	os.WriteFile(filepath.Join(bad, loader.ManifestFileName), []byte(`{"format": 1`), 0o644)
	if code := run([]string{"manifest", "--verify", bad}); code != 2 {
		t.Errorf("exit %d for a malformed manifest, want 2", code)
	}
}

func TestSynthUsage(t *testing.T) {
	for _, args := range [][]string{
		{},                                       // no --out
		{"--out", t.TempDir(), "--like", "gpt2"}, // unknown shape
		{"--out", t.TempDir(), "--layers", "-1"},
		{"--out", t.TempDir(), "extra"},
		{"--bogus"},
	} {
		var ue usageError
		if err := runSynth(args, &bytes.Buffer{}, &bytes.Buffer{}); !errors.As(err, &ue) {
			t.Errorf("synth %v: %v, want a usage error", args, err)
		}
	}
}

// TestInspectSummary: by default a summary (no tensor list) with the shards, dtypes, the tied
// head and the folder's config; --tensors lists the tensors with layers in numeric order.
func TestInspectSummary(t *testing.T) {
	dir, cfg := synthDir(t, 12)
	var out bytes.Buffer
	if err := runInspect([]string{dir}, &out, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	summary := out.String()
	for _, want := range []string{"files:          1 (model.safetensors)", fmt.Sprintf("entries:        %d (BF16 x%d)", len(cfg.Tensors()), len(cfg.Tensors())),
		"unique params:  " + units.Commas(cfg.UniqueParams()), "tied copies counted once: lm_head.weight = model.embed_tokens.weight",
		"config.json:    qwen3, layers 12, hidden 64, heads 4, kv_heads 2, head_dim 32, ff 96, vocab 320, context 40960, tied true"} {
		if !strings.Contains(summary, want) {
			t.Errorf("summary lacks %q:\n%s", want, summary)
		}
	}
	if strings.Contains(summary, "model.layers.") {
		t.Errorf("the summary lists tensors:\n%s", summary)
	}

	out.Reset()
	if err := runInspect([]string{"--tensors", dir}, &out, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	var layers []int
	for _, m := range regexp.MustCompile(`(?m)^model\.layers\.(\d+)\.input_layernorm`).FindAllStringSubmatch(out.String(), -1) {
		n, _ := strconv.Atoi(m[1])
		layers = append(layers, n)
	}
	if want := []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}; !slices.Equal(layers, want) {
		t.Errorf("layers listed in the order %v, want %v", layers, want)
	}
	if !strings.Contains(out.String(), "config.json:    qwen3") {
		t.Errorf("--tensors lacks the summary:\n%s", out.String())
	}
}

func TestNaturalLess(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{"model.layers.2.x", "model.layers.10.x", true},
		{"model.layers.10.x", "model.layers.2.x", false},
		{"a9", "a10", true},
		{"a1", "a01", true},
		{"a01", "a1", false},
		{"a", "a0", true},
		{"x.b", "x.a", false},
		{"same", "same", false},
	}
	for _, tt := range tests {
		if got := naturalLess(tt.a, tt.b); got != tt.want {
			t.Errorf("naturalLess(%q, %q) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}
