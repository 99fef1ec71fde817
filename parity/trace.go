package parity

import (
	"fmt"
	"math"
	"os"
	"path/filepath"

	"github.com/octlm/octlm/loader"
	"github.com/octlm/octlm/octlm"
)

// ActivationsFileName is case n's activation dump beside its logits: tensors ids (I64 [T]) and
// hidden (F32 [layers+1, T, hidden]): the embedding output, then the residual stream after
// every decoder layer (before the final norm), as the Qwen3.5 reference script writes them
// with --activations.
func ActivationsFileName(n int) string { return fmt.Sprintf("reference-activations-%d.safetensors", n) }

// TraceTolerance is where --trace says two hidden states part: the largest |got − want| of a
// position, over max(1, max |want|) at that position, above it.
const TraceTolerance = 1e-3

// LayerTrace is one hidden state's comparison over every position of a case.
type LayerTrace struct {
	Layer int    // -1: after the embedding; l: after decoder layer l
	Type  string // "embedding", or the layer's type (Qwen3.5's layer_types)
	// MaxAbsoluteError is the largest |got − want|, at position MaxPosition; Scaled is the
	// largest error over max(1, max |want|) of its position.
	MaxAbsoluteError float64
	MaxPosition      int
	Scaled           float64
	// FirstParted is the first position whose scaled error exceeds the tolerance, or -1.
	FirstParted int
}

// CaseTrace is one case's trace: a row per hidden state and the first one that parts.
type CaseTrace struct {
	Case   int
	Layers []LayerTrace
	// Parted is the index in Layers of the first hidden state that parts, or -1.
	Parted int
}

// Trace compares m's hidden states with the reference activations of every case that has an
// activation file beside its logits. It returns one CaseTrace per such case; a folder with none
// is ErrBadInput naming the file it looked for, and so is an architecture without a trace.
func Trace(m *octlm.Model, ref *Reference, tol float64, opts Options) ([]CaseTrace, error) {
	types := m.LayerTypes()
	if types == nil {
		return nil, badInput("parity: --trace: %w", octlm.ErrNoTrace)
	}
	var out []CaseTrace
	for _, c := range ref.Cases {
		path := filepath.Join(ref.Dir, ActivationsFileName(c.Index))
		if _, err := os.Stat(path); err != nil {
			continue
		}
		want, err := readActivations(path, c, m.Shape().Layers, m.Shape().Width)
		if err != nil {
			return out, err
		}
		opts.logf("case %d (%s): hidden states after the embedding and %d layers", c.Index, plural(c.Positions(), "position"), m.Shape().Layers)
		got, err := m.Trace(c.IDs)
		if err != nil {
			return out, fmt.Errorf("parity: trace of case %d: %w", c.Index, err)
		}
		out = append(out, compareHidden(c.Index, got, want, types, m.Shape().Width, tol))
	}
	if len(out) == 0 {
		return nil, badInput("parity: --trace: no activation files in %s (want %s beside %s; the reference script writes them with --activations)",
			ref.Dir, ActivationsFileName(0), ReferenceFileName(0))
	}
	return out, nil
}

// readActivations reads a case's hidden states, [layers+1][T·hidden].
func readActivations(path string, c Case, layers, hidden int) ([][]float32, error) {
	f, err := loader.Open(path)
	if err != nil {
		return nil, badInput("parity: %w", err)
	}
	defer f.Close()
	info, ok := f.Lookup("hidden")
	want := []int{layers + 1, len(c.IDs), hidden}
	if !ok || info.DType != loader.F32 || len(info.Shape) != 3 || info.Shape[0] != want[0] || info.Shape[1] != want[1] || info.Shape[2] != want[2] {
		return nil, badInput("parity: %s: want tensor \"hidden\" F32 %v (layers+1, positions, hidden)", path, want)
	}
	if idsInfo, ok := f.Lookup(IDsTensor); ok {
		ids := make([]int64, idsInfo.NumElements())
		if err := f.ReadInt64(idsInfo, ids); err != nil {
			return nil, badInput("parity: %s: %w", path, err)
		}
		for i, id := range ids {
			if i >= len(c.IDs) || int(id) != c.IDs[i] {
				return nil, badInput("parity: %s: token IDs differ from %s at position %d", path, c.Path, i)
			}
		}
	}
	flat := make([]float32, info.NumElements())
	if err := f.ReadFloat32(info, flat); err != nil {
		return nil, badInput("parity: %s: %w", path, err)
	}
	per := len(c.IDs) * hidden
	out := make([][]float32, want[0])
	for l := range out {
		out[l] = flat[l*per : (l+1)*per]
	}
	return out, nil
}

func compareHidden(index int, got, want [][]float32, types []string, h int, tol float64) CaseTrace {
	ct := CaseTrace{Case: index, Parted: -1}
	for l := range want {
		lt := LayerTrace{Layer: l - 1, Type: "embedding", FirstParted: -1}
		if l > 0 {
			lt.Type = types[l-1]
		}
		for p := 0; p*h < len(want[l]); p++ {
			var worst, scale float64 = 0, 1
			for i := p * h; i < (p+1)*h; i++ {
				d := math.Abs(float64(got[l][i]) - float64(want[l][i]))
				if math.IsNaN(d) || math.IsInf(float64(got[l][i]), 0) {
					d = math.Inf(1)
				}
				worst = max(worst, d)
				scale = max(scale, math.Abs(float64(want[l][i])))
			}
			if worst > lt.MaxAbsoluteError || p == 0 {
				lt.MaxAbsoluteError, lt.MaxPosition = worst, p
			}
			lt.Scaled = max(lt.Scaled, worst/scale)
			if lt.FirstParted < 0 && worst/scale > tol {
				lt.FirstParted = p
			}
		}
		if ct.Parted < 0 && lt.FirstParted >= 0 {
			ct.Parted = len(ct.Layers)
		}
		ct.Layers = append(ct.Layers, lt)
	}
	return ct
}
