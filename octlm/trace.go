package octlm

// The hidden-state trace: an architecture whose layers can be run one by one (tracer: Qwen3
// and Qwen3.5) hands back the hidden state after its embedding and after every layer, so a
// parity failure can be pinned to the first layer and position where the numbers part (octlm
// parity --trace).

import (
	"errors"
	"fmt"

	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/shapes"
	"github.com/gomlx/gomlx/core/graph"
	"github.com/gomlx/gomlx/core/tensors"
)

// tracer is an architecture that names its layers' kinds for the trace.
type tracer interface {
	layerTypes() []string
}

// ErrNoTrace is returned by Trace for an architecture without a per-layer trace.
var ErrNoTrace = errors.New("octlm: this architecture has no per-layer trace")

// LayerTypes names each layer's kind for a traceable architecture (Qwen3.5's layer_types), or
// nil.
func (m *Model) LayerTypes() []string {
	if t, ok := m.arch.(tracer); ok {
		return t.layerTypes()
	}
	return nil
}

// Trace runs ids through the full path in one step on an empty cache and returns the hidden
// state [len(ids), d] (float32, row-major) after the embedding (index 0) and after every layer
// (index 1 + layer), before the final norm.
func (m *Model) Trace(ids []int) ([][]float32, error) {
	if _, ok := m.arch.(tracer); !ok {
		return nil, ErrNoTrace
	}
	if len(ids) == 0 || len(ids) > m.shape.Context {
		return nil, fmt.Errorf("octlm: trace of %d tokens (want 1 to %d): %w", len(ids), m.shape.Context, ErrBadInput)
	}
	for i, id := range ids {
		if id < 0 || id >= m.shape.Vocab {
			return nil, fmt.Errorf("octlm: token %d at position %d is outside the vocabulary [0, %d): %w", id, i, m.shape.Vocab, ErrBadInput)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.weights == nil {
		return nil, errors.New("octlm: model is closed")
	}
	// One step on an empty cache, as a prompt's first step runs.
	rows := lengthBucket(len(ids))
	valid := len(ids)
	exec, err := graph.NewExec(m.Backend, func(g *graph.Graph, inputs []*graph.Node) []*graph.Node {
		w := newWeightSet(m.specs, m.layout, inputs[1:1+len(m.specs)])
		w.adapter = m.adapter.nodes(g)
		s := newStep(ops{layout: m.layout, vocab: m.shape.Vocab}, graph.InsertAxes(inputs[0], 0),
			graph.Const(g, []int32{0}), graph.Const(g, []int32{int32(valid)}), 0, true)
		specs := m.stateSpecs()
		s.kv, s.kvDType = make([]kvBlocks, len(specs)), m.cacheDType()
		state := make([]*graph.Node, len(specs))
		for i, spec := range specs {
			if spec.PosAxis >= 0 {
				s.kv[i] = kvBlocks{nil} // no block: the cache is empty
				continue
			}
			dtype := m.cacheDType()
			if spec.Float32 {
				dtype = dtypes.Float32
			}
			state[i] = graph.Zeros(g, shapes.Make(dtype, append([]int{1}, spec.shape(0)...)...))
		}
		hiddens, _ := m.arch.layers(s, w, state)
		for i, h := range hiddens {
			hiddens[i] = graph.ConvertDType(graph.Squeeze(h, 0), dtypes.Float32)
		}
		return hiddens
	})
	if err != nil {
		return nil, fmt.Errorf("octlm: building the trace graph: %w", err)
	}
	defer exec.Finalize()
	padded := make([]int32, rows)
	for i, id := range ids {
		padded[i] = int32(id)
	}
	args := []any{padded}
	for _, t := range m.weights {
		args = append(args, t)
	}
	outputs, err := exec.Call(args...)
	if err != nil {
		return nil, fmt.Errorf("octlm: running the trace (%d tokens): %w", len(ids), err)
	}
	out := make([][]float32, len(outputs))
	for i, t := range outputs {
		data, err := tensors.CopyFlatData[float32](t)
		_ = t.FinalizeAll()
		if err != nil {
			return nil, fmt.Errorf("octlm: reading hidden states: %w", err)
		}
		out[i] = data[:valid*m.shape.Width]
	}
	return out, nil
}
