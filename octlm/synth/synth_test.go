package synth

import (
	"bytes"
	"fmt"
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

// TestHubShards holds the presets to the Hub's checkpoints: shard count, metadata.total_size of
// model.safetensors.index.json, and for Qwen3-1.7B the published file sizes.
func TestHubShards(t *testing.T) {
	tests := []struct {
		name      string
		cfg       QwenLike
		files     []string // shard names
		totalSize int64    // index metadata.total_size: tensor bytes, the stored head included
		sizes     []int64  // published file sizes, where known
		untied    bool
	}{
		{"qwen3-0.6b", Qwen3_0_6B(), []string{"model.safetensors"}, 1_503_264_768, []int64{1_503_300_328}, false},
		{"qwen3-1.7b", Qwen3_1_7B(), []string{"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"},
			4_063_479_808, []int64{3_441_185_608, 622_329_984}, false},
		{"qwen3-4b", Qwen3_4B(), []string{"model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors", "model-00003-of-00003.safetensors"},
			8_822_848_512, nil, false},
		{"qwen3-8b", Qwen3_8B(), []string{"model-00001-of-00005.safetensors", "model-00002-of-00005.safetensors", "model-00003-of-00005.safetensors",
			"model-00004-of-00005.safetensors", "model-00005-of-00005.safetensors"}, 16_381_470_720, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if c, err := Like(tt.name); err != nil || c != tt.cfg {
				t.Fatalf("Like(%q) = %+v, %v", tt.name, c, err)
			}
			if tt.cfg.Untied != tt.untied || !bytes.Contains(tt.cfg.ConfigJSON(), fmt.Appendf(nil, `"tie_word_embeddings": %t,`, !tt.untied)) {
				t.Errorf("untied %v, config.json:\n%s", tt.cfg.Untied, tt.cfg.ConfigJSON())
			}
			shards := tt.cfg.Shards(0)
			var names []string
			seen := map[string]bool{}
			for i, s := range shards {
				names = append(names, s.Name)
				size, err := s.Size()
				if err != nil {
					t.Fatal(err)
				}
				if i < len(tt.sizes) && size != tt.sizes[i] {
					t.Errorf("%s: %d bytes, the Hub's is %d", s.Name, size, tt.sizes[i])
				}
				var tensorBytes int64
				for _, ts := range s.Tensors {
					tensorBytes += ts.Bytes()
					seen[ts.Name] = true
				}
				if tensorBytes > HubShardBytes {
					t.Errorf("%s holds %d tensor bytes, past the 4 GB shard size", s.Name, tensorBytes)
				}
			}
			if !slices.Equal(names, tt.files) {
				t.Errorf("shards %v, want %v", names, tt.files)
			}
			if len(seen) != len(tt.cfg.Tensors()) {
				t.Errorf("the shards hold %d distinct tensors, the checkpoint %d", len(seen), len(tt.cfg.Tensors()))
			}
			if len(shards) > 1 {
				idx, err := loader.ReadIndex(IndexJSON(shards))
				if err != nil {
					t.Fatal(err)
				}
				if !idx.HasTotalSize || idx.TotalSize != tt.totalSize || len(idx.WeightMap) != len(tt.cfg.Tensors()) {
					t.Errorf("index total_size %d (%v), %d names; want %d and %d", idx.TotalSize, idx.HasTotalSize, len(idx.WeightMap), tt.totalSize, len(tt.cfg.Tensors()))
				}
				// The head comes last; in Qwen3-1.7B and 8B it fills the last shard alone.
				last := shards[len(shards)-1].Tensors
				if last[len(last)-1].Name != "lm_head.weight" || (len(last) == 1) != (tt.name != "qwen3-4b") {
					t.Errorf("last shard holds %d tensors, %s last", len(last), last[len(last)-1].Name)
				}
			}
		})
	}
}

// TestShardedWrite writes a small untied checkpoint in shards and reads it back: the index is
// the one transformers writes, every shard opens, the head has its own values.
func TestShardedWrite(t *testing.T) {
	cfg := Tiny()
	cfg.Untied = true
	dir := t.TempDir()
	if err := WriteWith(dir, cfg, Options{Seed: 3, NoTokenizer: true, MaxShardBytes: 40_000}); err != nil {
		t.Fatal(err)
	}
	shards := cfg.Shards(40_000)
	if len(shards) < 3 {
		t.Fatalf("%d shards, want at least 3 from a 40 kB limit", len(shards))
	}
	if _, err := os.Stat(filepath.Join(dir, loader.SingleFileName)); err == nil {
		t.Error("a sharded checkpoint also has model.safetensors")
	}
	index, err := os.ReadFile(filepath.Join(dir, loader.IndexFileName))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(index, []byte("{\n  \"metadata\": {\n    \"total_size\": ")) || !bytes.HasSuffix(index, []byte("\"\n  }\n}\n")) {
		t.Errorf("index.json is not laid out as transformers writes it:\n%s", index)
	}
	ckpt, err := loader.OpenCheckpoint(dir) // checks total_size and every shard against the index
	if err != nil {
		t.Fatal(err)
	}
	defer ckpt.Close()
	if ckpt.Len() != len(cfg.Tensors()) || len(ckpt.Files()) != len(shards) {
		t.Fatalf("%d tensors in %d files, want %d in %d", ckpt.Len(), len(ckpt.Files()), len(cfg.Tensors()), len(shards))
	}
	for _, s := range shards {
		st, err := os.Stat(filepath.Join(dir, s.Name))
		size, _ := s.Size()
		if err != nil || st.Size() != size {
			t.Errorf("%s: %v, size %d, Size() %d", s.Name, err, st.Size(), size)
		}
	}
	read := func(name string) []float32 {
		e, ok := ckpt.Lookup(name)
		if !ok {
			t.Fatalf("no %s", name)
		}
		out := make([]float32, e.Info.NumElements())
		if err := e.File.ReadFloat32(e.Info, out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	if slices.Equal(read("lm_head.weight"), read("model.embed_tokens.weight")) {
		t.Error("the untied head holds the embedding's values")
	}
	if !bytes.Contains(mustRead(t, filepath.Join(dir, "config.json")), []byte(`"tie_word_embeddings": false,`)) {
		t.Error("config.json does not say tie_word_embeddings false")
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestProgressInALog: progress written to a file or pipe (not a terminal) is whole lines, a few
// of them, never a carriage return redrawing in place; the last ones say the file is complete.
func TestProgressInALog(t *testing.T) {
	var log bytes.Buffer
	if err := Write(t.TempDir(), Tiny(), 1, &log); err != nil {
		t.Fatal(err)
	}
	text := log.String()
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	if strings.Contains(text, "\r") || len(lines) < 2 || len(lines) > 5 {
		t.Fatalf("progress in a log:\n%q", text)
	}
	full := lines[len(lines)-2]
	if !strings.HasPrefix(full, "synth: model.safetensors [") || !strings.Contains(full, strings.Repeat("=", 30)) {
		t.Errorf("the line before the last does not show model.safetensors complete:\n%q", text)
	}
	if !strings.HasPrefix(lines[len(lines)-1], "synth: model.safetensors: done in") {
		t.Errorf("the last line does not say model.safetensors is done:\n%q", text)
	}
}
