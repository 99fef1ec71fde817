package synth

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/octlm/octlm/loader"
)

func TestQwen3Sizes(t *testing.T) {
	c := Qwen3_0_6B()
	specs := c.Tensors()
	if len(specs) != 311 {
		t.Errorf("%d entries, want 311", len(specs))
	}
	if got := c.UniqueParams(); got != 596_049_920 {
		t.Errorf("unique params %d, want 596,049,920", got)
	}
	size, err := c.ModelFileSize()
	if err != nil || size != 1_503_300_328 {
		t.Errorf("model.safetensors would be %d bytes (%v), the Hub's is 1,503,300,328", size, err)
	}
	header, _, _ := loader.EncodeHeader(specs, map[string]string{"format": "pt"})
	if len(header) != 8+35_552 {
		t.Errorf("header %d bytes, the Hub's is 8 + 35,552", len(header))
	}
}

// TestTinyMatchesFixture writes a tiny checkpoint and compares it with testdata/tiny-qwen3,
// which has the Hub's structure: same config.json bytes, tensor names, shapes, order, sizes.
func TestTinyMatchesFixture(t *testing.T) {
	dir := t.TempDir()
	if err := WriteWith(dir, Tiny(), Options{Seed: 7, Manifest: true}); err != nil {
		t.Fatal(err)
	}
	fix := filepath.Join("..", "..", "testdata", "tiny-qwen3")
	wantCfg, _ := os.ReadFile(filepath.Join(fix, "config.json"))
	gotCfg, _ := os.ReadFile(filepath.Join(dir, "config.json"))
	if !bytes.Equal(gotCfg, wantCfg) {
		t.Errorf("config.json differs from the fixture:\n%s", gotCfg)
	}
	a, err := loader.Open(filepath.Join(fix, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := loader.Open(filepath.Join(dir, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ta, tb := a.Tensors(), b.Tensors()
	if len(ta) != len(tb) {
		t.Fatalf("%d tensors, fixture has %d", len(tb), len(ta))
	}
	for i := range ta {
		if ta[i].Name != tb[i].Name || ta[i].DType != tb[i].DType || !slices.Equal(ta[i].Shape, tb[i].Shape) || ta[i].Offset != tb[i].Offset {
			t.Errorf("tensor %d: %+v, fixture %+v", i, tb[i], ta[i])
		}
	}
	if st, _ := os.Stat(filepath.Join(fix, "model.safetensors")); st.Size() != b.Size() {
		t.Errorf("size %d, fixture %d", b.Size(), st.Size())
	}
	// Tied copy equal, values distributed as promised.
	read := func(name string) []float32 {
		ti, _ := b.Lookup(name)
		out := make([]float32, ti.NumElements())
		if err := b.ReadFloat32(ti, out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	emb := read("model.embed_tokens.weight")
	if !slices.Equal(emb, read("lm_head.weight")) {
		t.Error("lm_head.weight differs from the embedding")
	}
	mean, std := stats(emb)
	if math.Abs(mean) > 0.002 || math.Abs(std-0.02) > 0.002 {
		t.Errorf("embedding mean %.4f std %.4f, want 0 and 0.02", mean, std)
	}
	mean, std = stats(read("model.layers.1.input_layernorm.weight"))
	if math.Abs(mean-1) > 0.01 || std > 0.03 {
		t.Errorf("norm mean %.4f std %.4f, want near 1", mean, std)
	}
	if _, err := loader.VerifySnapshot(dir, nil); err != nil {
		t.Errorf("manifest: %v", err)
	}
	for _, name := range []string{"tokenizer.json", "tokenizer_config.json"} {
		got, _ := os.ReadFile(filepath.Join(dir, name))
		want, _ := os.ReadFile(filepath.Join("..", "..", "testdata", "qwen3-tokenizer", name))
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from testdata", name)
		}
	}
}

func stats(v []float32) (mean, std float64) {
	for _, x := range v {
		mean += float64(x)
	}
	mean /= float64(len(v))
	for _, x := range v {
		std += (float64(x) - mean) * (float64(x) - mean)
	}
	return mean, math.Sqrt(std / float64(len(v)))
}

func TestDeterministic(t *testing.T) {
	cfg := Tiny()
	cfg.NumLayers = 1
	cfg.VocabSize = 3000 // the embedding spans several chunks
	read := func(seed int64) []byte {
		dir := t.TempDir()
		if err := WriteWith(dir, cfg, Options{Seed: seed, NoTokenizer: true}); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(dir, "model.safetensors"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(dir, "tokenizer.json")); err == nil {
			t.Error("NoTokenizer wrote tokenizer.json")
		}
		return b
	}
	a, b, c := read(1), read(1), read(2)
	if !bytes.Equal(a, b) {
		t.Error("same seed, different bytes")
	}
	if bytes.Equal(a, c) {
		t.Error("different seeds, same bytes")
	}
}

func TestValidate(t *testing.T) {
	bad := []func(*QwenLike){
		func(c *QwenLike) { c.NumLayers = 0 },
		func(c *QwenLike) { c.NumKVHeads = 3 },
		func(c *QwenLike) { c.VocabSize = 1 },
		func(c *QwenLike) { c.HeadDim = -1 },
		func(c *QwenLike) { c.RopeTheta = 0 },
	}
	for i, mod := range bad {
		c := Tiny()
		mod(&c)
		if err := Write(t.TempDir(), c, 0, nil); err == nil {
			t.Errorf("case %d: invalid config accepted", i)
		}
	}
	if _, err := Like("gpt2"); err == nil {
		t.Error("Like accepted an unknown name")
	}
}

func TestTokenizerFiles(t *testing.T) {
	files, err := TokenizerFiles()
	if err != nil {
		t.Fatal(err)
	}
	if len(files["tokenizer.json"]) != 11_422_654 || len(files["tokenizer_config.json"]) != 9_732 {
		t.Errorf("sizes %d %d", len(files["tokenizer.json"]), len(files["tokenizer_config.json"]))
	}
}

// TestProgressInALog: progress written to a file or pipe (not a terminal) is whole lines, a few
// of them, never a carriage return redrawing in place.
func TestProgressInALog(t *testing.T) {
	var log bytes.Buffer
	if err := Write(t.TempDir(), Tiny(), 1, &log); err != nil {
		t.Fatal(err)
	}
	text := log.String()
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	if strings.Contains(text, "\r") || len(lines) < 2 || len(lines) > 5 || !strings.HasPrefix(lines[len(lines)-1], "synth: model.safetensors 100%") {
		t.Errorf("progress in a log:\n%q", text)
	}
}
