package octlm

import (
	"math"
	"testing"

	"github.com/octlm/octlm/octlm/synth"
)

// TestFullSizeQwen3 builds a random checkpoint with Qwen3-0.6B's exact shapes (1.4 GiB), loads
// it, and runs a forward pass and a few cached steps: every one of the 596,049,920 parameters
// goes through the real loader and graph.
func TestFullSizeQwen3(t *testing.T) {
	if testing.Short() {
		t.Skip("writes and loads a 1.4 GiB checkpoint")
	}
	dir := t.TempDir()
	if err := synth.WriteWith(dir, synth.Qwen3_0_6B(), synth.Options{Seed: 1, NoTokenizer: true}); err != nil {
		t.Fatal(err)
	}
	m, err := Load(dir, LoadOptions{Backend: goBackend(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if got := qwen3Of(t, m).Parameters(); got != 596_049_920 {
		t.Errorf("parameters = %d, want 596,049,920", got)
	}
	if got, want := m.WeightBytes(), int64(4*596_049_920); got < want {
		t.Errorf("resident weights %d bytes, want at least %d (float32)", got, want)
	}
	prompt := []int{151644, 872, 198, 3838, 374, 220, 17, 488, 220, 17, 30, 151645}
	logits, err := m.Forward(prompt)
	if err != nil {
		t.Fatal(err)
	}
	if logits.Rows != len(prompt) || logits.Vocab != 151936 {
		t.Fatalf("logits [%d, %d]", logits.Rows, logits.Vocab)
	}
	for _, v := range logits.Data {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			t.Fatal("non-finite logit")
		}
	}
	// The cached path agrees with the full path at full size too.
	cache, err := m.NewCache(len(prompt))
	if err != nil {
		t.Fatal(err)
	}
	defer cache.Close()
	split := len(prompt) / 2
	if _, err := m.ForwardCached(prompt[:split], cache); err != nil {
		t.Fatal(err)
	}
	second, err := m.ForwardCached(prompt[split:], cache)
	if err != nil {
		t.Fatal(err)
	}
	worst := 0.0
	for i, v := range second.Data {
		worst = max(worst, math.Abs(float64(v)-float64(logits.Data[split*logits.Vocab+i])))
	}
	t.Logf("cached vs full at Qwen3-0.6B size: max abs difference %.3g", worst)
	if worst > 1e-3 {
		t.Errorf("cached and full paths differ by %.3g", worst)
	}
}
