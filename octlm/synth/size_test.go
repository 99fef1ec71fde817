package synth

import (
	"math"
	"testing"
)

// TestEstimatedBytes: the estimate covers the model file and the tokenizer without being far
// above them, and absurd sizes give a huge number instead of overflowing.
func TestEstimatedBytes(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  QwenLike
	}{{"tiny", Tiny()}, {"qwen3-0.6b", Qwen3_0_6B()}} {
		size, err := c.cfg.ModelFileSize()
		if err != nil {
			t.Fatal(err)
		}
		tok, err := TokenizerFiles()
		if err != nil {
			t.Fatal(err)
		}
		actual := float64(size + int64(len(tok["tokenizer.json"])+len(tok["tokenizer_config.json"])) + 4096)
		est := c.cfg.EstimatedBytes()
		if est < actual || est > 1.01*actual+(2<<20) {
			t.Errorf("%s: estimate %.0f bytes, written %.0f", c.name, est, actual)
		}
	}
	huge := Qwen3_0_6B()
	huge.NumLayers, huge.VocabSize = 1_000_000_000, 2_000_000_000
	if est := huge.EstimatedBytes(); !(est > 1e16) || math.IsInf(est, 0) {
		t.Errorf("a billion layers: estimate %g", est)
	}
}
