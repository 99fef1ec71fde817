package synth

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gomlx/compute"
	_ "github.com/gomlx/compute/gobackend"

	"github.com/octlm/octlm/loader"
	"github.com/octlm/octlm/octlm"
)

// TestQwen35Presets: each preset's config.json reads back through octlm's strict Qwen3.5 parser
// with the shapes of QWEN35.md's table, and synth's tensor list (the text part) holds exactly as
// many parameters as octlm's own weight table declares: two independent declarations agree.
func TestQwen35Presets(t *testing.T) {
	tests := []struct {
		name                                  string
		hidden, layers, heads, kv, ff, kh, vh int
		tied                                  bool
	}{
		{"qwen3.5-0.8b", 1024, 24, 8, 2, 3584, 16, 16, true},
		{"qwen3.5-2b", 2048, 24, 8, 2, 6144, 16, 16, true},
		{"qwen3.5-4b", 2560, 32, 16, 4, 9216, 16, 32, true},
		{"qwen3.5-9b", 4096, 32, 16, 4, 12288, 16, 32, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q, ok := Qwen35LikeNamed(tt.name)
			if !ok {
				t.Fatal("unknown preset")
			}
			c, err := octlm.Qwen35ConfigFrom(q.ConfigJSON())
			if err != nil {
				t.Fatal(err)
			}
			if c.Hidden != tt.hidden || c.NLayers != tt.layers || c.Heads != tt.heads || c.KVHeads != tt.kv || c.FF != tt.ff ||
				c.LinKeyHeads != tt.kh || c.LinValueHeads != tt.vh || c.Tied != tt.tied || c.HeadDim != 256 || c.RotaryDim != 64 ||
				c.VocabSize != 248320 || !c.Multimodal || c.CountLayers(octlm.FullAttention) != tt.layers/4 {
				t.Errorf("config read back as %+v", c)
			}
			var text int64
			for _, s := range q.Tensors() {
				if strings.HasPrefix(s.Name, "model.visual.") || strings.HasPrefix(s.Name, "mtp.") {
					continue
				}
				n := int64(1)
				for _, d := range s.Shape {
					n *= int64(d)
				}
				text += n
			}
			if text != c.Parameters() {
				t.Errorf("synth writes %d text parameters, octlm's table declares %d", text, c.Parameters())
			}
			t.Logf("%s: %.3g text parameters, %d tensors", tt.name, float64(text), len(q.Tensors()))
		})
	}
}

// TestQwen35ShardedWrite writes a small Qwen3.5-shaped checkpoint in shards, loads it with
// octlm and runs it: finite logits, the index naming every tensor.
func TestQwen35ShardedWrite(t *testing.T) {
	q := Qwen35_4B()
	q.NumLayers, q.VocabSize, q.HiddenSize, q.IntermediateSize, q.EOSTokenID = 4, 512, 64, 96, 511
	q.HeadDim, q.LinearKeyHeadDim, q.LinearValueHeadDim, q.VisionHidden = 32, 16, 16, 8
	q.MRopeSection = [3]int{2, 1, 1} // 8 rotary dims: 4 pairs
	dir := t.TempDir()
	if err := WriteQwen35(dir, q, Options{Seed: 3, MaxShardBytes: 200_000}); err != nil {
		t.Fatal(err)
	}
	index, err := os.ReadFile(filepath.Join(dir, loader.IndexFileName))
	if err != nil {
		t.Fatalf("no index for a sharded write: %v", err)
	}
	for _, s := range q.Tensors() {
		if !strings.Contains(string(index), `"`+s.Name+`"`) {
			t.Errorf("index lacks %s", s.Name)
		}
	}
	backend, err := compute.NewWithConfig("go")
	if err != nil {
		t.Fatal(err)
	}
	defer backend.Finalize()
	m, err := octlm.Load(dir, octlm.LoadOptions{Backend: backend})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	logits, err := m.Forward([]int{1, 2, 3, 4, 5})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range logits.Data {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			t.Fatalf("non-finite logit %v", v)
		}
	}
}
