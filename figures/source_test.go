package figures

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/octlm/octlm/octlm"
	"github.com/octlm/octlm/xla"
)

// TestSourceBackend: the automatic choice says nothing of bf16 in a float32 notebook (it used to
// say "passed over for bf16"); asked for ONNX Runtime, float32 loads run on it and the
// half-precision ones on the pure-Go backend, which (unlike ONNX Runtime's CPU kernels) runs them.
func TestSourceBackend(t *testing.T) {
	t.Setenv(xla.EnvBackend, "")
	src, err := Open(Options{})
	if err != nil {
		t.Fatal(err)
	}
	if s := src.Info.String(); strings.Contains(s, "bf16") {
		t.Errorf("the automatic backend line speaks of bf16: %s", s)
	}
	src.Close()

	if _, _, err := xla.DefaultPlaces().FindONNX(); err != nil {
		t.Skip("no ONNX Runtime library here")
	}
	src, err = Open(Options{Backend: xla.ONNX})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	for dt, want := range map[octlm.DType]string{octlm.Float32: xla.ONNX, octlm.BFloat16: xla.Go, octlm.Float16: xla.Go} {
		m, err := src.Load(dt, nil)
		if err != nil {
			t.Fatalf("%s: %v", dt, err)
		}
		if _, err := m.Generate([]int{1, 2, 3}, octlm.GenerateOptions{MaxNewTokens: 2, Sampling: octlm.Greedy()}); err != nil {
			t.Errorf("%s on %s: %v", dt, m.Backend.Name(), err)
		}
		if !strings.HasPrefix(strings.ToLower(m.Backend.Name()), want) {
			t.Errorf("%s loaded on %s, want %s", dt, m.Backend.Name(), want)
		}
		m.Close()
	}
}

// TestSourceConfigs: Shape reads any architecture's checkpoint; Qwen3Config reads a Qwen3 one
// whole and refuses a Qwen3.5 one by name (it used to return Qwen3.5 projected onto Qwen3's
// Config).
func TestSourceConfigs(t *testing.T) {
	for _, tt := range []struct {
		fixture string
		qwen3   bool
	}{
		{"tiny-qwen3", true},
		{"tiny-qwen35", false},
	} {
		t.Run(tt.fixture, func(t *testing.T) {
			src := &Source{Label: tt.fixture, Dir: filepath.Join("..", "testdata", tt.fixture)}
			want, err := octlm.ReadShape(filepath.Join(src.Dir, "config.json"))
			if err != nil {
				t.Fatal(err)
			}
			if got, err := src.Shape(); err != nil || got != want || got.Layers == 0 {
				t.Errorf("Shape %+v, %v; want %+v", got, err, want)
			}
			cfg, err := src.Qwen3Config()
			switch {
			case tt.qwen3 && (err != nil || cfg.VocabSize != want.Vocab || cfg.NLayers != want.Layers):
				t.Errorf("Qwen3Config %+v, %v; want the fixture's", cfg, err)
			case !tt.qwen3 && (err == nil || !strings.Contains(err.Error(), tt.fixture+" is not a Qwen3 checkpoint")):
				t.Errorf("Qwen3Config of a Qwen3.5 checkpoint: %v, want a refusal naming it", err)
			}
		})
	}
}
