package octlm

import (
	"path/filepath"
	"testing"
)

// TestModelShape checks the seam's sizes against each architecture's own config: Model.Shape and
// ReadShape agree with the config.json the fixture was built from, and Qwen3Config answers for
// Qwen3 alone.
func TestModelShape(t *testing.T) {
	q3, err := ReadQwen3Config(filepath.Join(fixtureDir("tiny-qwen3"), "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	q35, err := ReadQwen35Config(filepath.Join(fixtureDir("tiny-qwen35"), "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		fixture string
		want    Shape
		qwen3   bool
	}{
		{"tiny-qwen3", Shape{Vocab: q3.VocabSize, Context: q3.ContextLength, Width: q3.DModel, Heads: q3.NHeads, Layers: q3.NLayers}, true},
		{"tiny-qwen35", Shape{Vocab: q35.VocabSize, Context: q35.ContextLength, Width: q35.Hidden, Heads: q35.Heads, Layers: q35.NLayers}, false},
	} {
		t.Run(tt.fixture, func(t *testing.T) {
			read, err := ReadShape(filepath.Join(fixtureDir(tt.fixture), "config.json"))
			if err != nil {
				t.Fatal(err)
			}
			m := loadFixture(t, tt.fixture, Float32)
			if got := m.Shape(); got != tt.want || read != tt.want {
				t.Errorf("Model.Shape %+v, ReadShape %+v, want %+v", got, read, tt.want)
			}
			c, ok := m.Qwen3Config()
			if ok != tt.qwen3 || ok && c != q3 {
				t.Errorf("Qwen3Config = %+v, %v; want the fixture's Config: %v", c, ok, tt.qwen3)
			}
		})
	}
}
