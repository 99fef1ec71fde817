package parity

import (
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/octlm/octlm/loader"
	"github.com/octlm/octlm/octlm"
)

// TestRunQwen35 runs the gated protocol on the Qwen3.5 fixtures: both paths of every case within
// the gate, every top token the reference's.
func TestRunQwen35(t *testing.T) {
	for _, name := range []string{"tiny-qwen35", "tiny-qwen35-sharded", "tiny-qwen35-wide"} {
		t.Run(name, func(t *testing.T) { runQwen35Fixture(t, name) })
	}
}

func runQwen35Fixture(t *testing.T, name string) {
	m := loadModel(t, name, octlm.Float32)
	ref := readRef(t, filepath.Join(fixtureDir(name), "reference"))
	rows, err := Run(m, ref, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if want := 2 * len(ref.Cases); len(rows) != want {
		t.Fatalf("%d rows, want %d", len(rows), want)
	}
	for _, r := range rows {
		t.Logf("case %d %-6s %4d positions: max abs error %.3g, argmax %d/%d", r.Case, r.Path, r.Stats.Positions,
			r.Stats.MaxAbsoluteError, r.Stats.ArgmaxMatches, r.Stats.Positions)
		if r.Failed() || r.Stats.ArgmaxMatches != r.Stats.Positions {
			t.Errorf("case %d %s: %+v", r.Case, r.Path, r.Stats)
		}
	}
}

// writeActivations writes a reference-activations file in the reference script's format.
func writeActivations(t *testing.T, path string, ids []int, hidden [][]float32, positions, width int) {
	t.Helper()
	idBytes := make([]byte, 8*len(ids))
	for i, id := range ids {
		binary.LittleEndian.PutUint64(idBytes[8*i:], uint64(id))
	}
	var h []byte
	for _, layer := range hidden {
		for _, v := range layer {
			h = binary.LittleEndian.AppendUint32(h, math.Float32bits(v))
		}
	}
	err := loader.WriteFile(path, []loader.WriteTensor{
		{Name: IDsTensor, DType: loader.I64, Shape: []int{len(ids)}, Data: idBytes},
		{Name: "hidden", DType: loader.F32, Shape: []int{len(hidden), positions, width}, Data: h},
	}, map[string]string{"format": "octlm parity activations"})
	if err != nil {
		t.Fatal(err)
	}
}

// TestTrace builds activation dumps from a model's own hidden states, one exact and one with a
// single value moved after layer `layer` at position 5: the first agrees everywhere, the second
// parts there and not before. Then tiny-qwen35 against its float64 reference dumps: no parting.
func TestTrace(t *testing.T) {
	tests := []struct {
		name, typ string
		layer     int
	}{
		{"tiny-qwen35", octlm.LinearAttention, 2},
		{"tiny-qwen3", "decoder", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tracePlanted(t, tt.name, tt.layer, tt.typ) })
	}
	m := loadModel(t, "tiny-qwen35", octlm.Float32)
	traces, err := Trace(m, readRef(t, filepath.Join(fixtureDir("tiny-qwen35"), "reference")), TraceTolerance, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ct := range traces {
		if ct.Parted >= 0 {
			t.Errorf("tiny-qwen35 case %d parts from its float64 reference at %+v", ct.Case, ct.Layers[ct.Parted])
		}
	}
}

func tracePlanted(t *testing.T, name string, layer int, typ string) {
	m := loadModel(t, name, octlm.Float32)
	src := filepath.Join(fixtureDir(name), "reference")
	dir := t.TempDir()
	for _, n := range []int{1, 2} {
		data, err := os.ReadFile(filepath.Join(src, ReferenceFileName(n)))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, ReferenceFileName(n-1)), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ref := readRef(t, dir)

	if _, err := Trace(m, ref, TraceTolerance, Options{}); !errors.Is(err, ErrBadInput) {
		t.Fatalf("no activation files: error %v, want ErrBadInput", err)
	}
	width := m.Shape().Width
	for i, c := range ref.Cases {
		hidden, err := m.Trace(c.IDs)
		if err != nil {
			t.Fatal(err)
		}
		if len(hidden) != m.Shape().Layers+1 || len(hidden[0]) != len(c.IDs)*width {
			t.Fatalf("trace shape: %d states of %d values", len(hidden), len(hidden[0]))
		}
		if i == 1 {
			hidden[layer+1][5*width+7] += 0.5 // after layer `layer`, position 5
		}
		writeActivations(t, filepath.Join(dir, ActivationsFileName(i)), c.IDs, hidden, len(c.IDs), width)
	}
	traces, err := Trace(m, ref, TraceTolerance, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(traces) != 2 {
		t.Fatalf("%d traces, want 2", len(traces))
	}
	if traces[0].Parted != -1 {
		t.Errorf("exact dump: parted at %d, want nowhere", traces[0].Parted)
	}
	ct := traces[1]
	if ct.Parted < 0 {
		t.Fatal("perturbed dump: no parting found")
	}
	lt := ct.Layers[ct.Parted]
	if lt.Layer != layer || lt.FirstParted != 5 || lt.Type != typ {
		t.Errorf("perturbed dump: parted after layer %d (%s) at position %d, want layer %d (%s) at 5", lt.Layer, lt.Type, lt.FirstParted, layer, typ)
	}
	if math.Abs(lt.MaxAbsoluteError-0.5) > 1e-3 || lt.MaxPosition != 5 {
		t.Errorf("perturbed dump: max error %g at %d, want 0.5 at 5", lt.MaxAbsoluteError, lt.MaxPosition)
	}
}
