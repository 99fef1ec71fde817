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

// tracer is an architecture that can return every layer's output.
type tracer interface {
	// layers is forward, returning the hidden state after the embedding and after each layer
	// ([S, d] each, NLayers+1 of them) instead of the last one only.
	layers(s *step, w weightSet, state []*graph.Node) (hiddens, newState []*graph.Node)
	layerTypes() []string
}

// traceRows: a traced prompt is padded to a multiple of this many rows (Qwen3.5's DeltaNet
// chunk), its padding rows masked as in any step.
const traceRows = maxDeltaChunk

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
	tr, ok := m.arch.(tracer)
	if !ok {
		return nil, ErrNoTrace
	}
	if len(ids) == 0 || len(ids) > m.Config.ContextLength {
		return nil, fmt.Errorf("octlm: trace of %d tokens (want 1 to %d): %w", len(ids), m.Config.ContextLength, ErrBadInput)
	}
	for i, id := range ids {
		if id < 0 || id >= m.Config.VocabSize {
			return nil, fmt.Errorf("octlm: token %d at position %d is outside the vocabulary [0, %d): %w", id, i, m.Config.VocabSize, ErrBadInput)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.weights == nil {
		return nil, errors.New("octlm: model is closed")
	}
	rows := ceilDiv(len(ids), traceRows) * traceRows
	valid := len(ids)
	exec, err := graph.NewExec(m.Backend, func(g *graph.Graph, inputs []*graph.Node) []*graph.Node {
		w := newWeightSet(m.specs, inputs[1:1+len(m.specs)])
		idsNode := inputs[0]
		offsets := graph.Iota(g, idsNode.Shape(), 0)
		keyPos := graph.Iota(g, shapes.Make(dtypes.Int32, rows), 0)
		s := &step{
			ops: ops{layout: m.layout, vocab: m.Config.VocabSize}, ids: idsNode,
			start: graph.Const(g, int32(0)), valid: graph.Const(g, int32(valid)),
			positions: offsets, real: graph.LessThan(offsets, graph.Const(g, int32(valid))), keyPos: keyPos,
			causal: graph.LessOrEqual(graph.InsertAxes(keyPos, 0), graph.InsertAxes(offsets, -1)),
		}
		var state []*graph.Node
		for _, spec := range m.arch.state() {
			dtype := m.cacheDType()
			if spec.Float32 {
				dtype = dtypes.Float32
			}
			state = append(state, graph.Zeros(g, shapes.Make(dtype, spec.shape(rows)...)))
		}
		hiddens, _ := tr.layers(s, w, state)
		for i, h := range hiddens {
			hiddens[i] = graph.ConvertDType(h, dtypes.Float32)
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
		out[i] = data[:valid*m.Config.DModel]
	}
	return out, nil
}

// layers is qwen3.forward keeping every layer's output, for the trace.
func (q qwen3) layers(s *step, w weightSet, cache []*graph.Node) ([]*graph.Node, []*graph.Node) {
	cos, sin := rotaryTables(s.positions, q.c.HeadWidth(), q.c.Base())
	hidden := s.ops.embed(w.get(EmbeddingName), s.ids)
	hiddens := []*graph.Node{hidden}
	newCache := make([]*graph.Node, 0, len(cache))
	for i := range q.c.NLayers {
		var k, v *graph.Node
		hidden, k, v = q.decoderLayer(s, w.under(fmt.Sprintf("model.layers.%d.", i)), hidden, cos, sin, cache[2*i], cache[2*i+1])
		hiddens = append(hiddens, hidden)
		newCache = append(newCache, k, v)
	}
	return hiddens, newCache
}

// layerTypes: every Qwen3 layer is the same decoder layer.
func (q qwen3) layerTypes() []string {
	types := make([]string, q.c.NLayers)
	for i := range types {
		types[i] = "decoder"
	}
	return types
}
