package octlm

// The step graph every architecture runs in: it takes a chunk of S token IDs (padded to a
// length bucket; only the first `valid` are real) that start at cache position `start`, hands
// them with the weights and the cache state to the architecture, which writes the chunk into
// the state (K/V at slots start..start+S-1, or a recurrent state advanced by the valid rows) and
// attends over the first Lb cache slots (Lb ≥ start+S, see attendLength), and returns logits for
// the rows listed in logitRows only. A long prompt runs as several such steps (see Model.run).
//
// The architectures' layer code runs on a batch axis ([B, S, …]); the step graph runs one
// sequence (B = 1) and the training forward (training.go) B right-padded rows without a cache.

import (
	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/shapes"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // the graph DSL reads best unqualified
)

// step is one chunk of B sequences as an architecture's layers see it: S token IDs per row
// (padded; only the first valid[b] are real) starting at cache position start[b], attending over
// the first Lb cache slots, or, without a cache (training), over the chunk itself (Lb = S).
type step struct {
	ops       ops   // the engine's layout: products, lookups, rsqrt
	ids       *Node // int32 [B, S]: token IDs, padded with zeros
	start     *Node // int32 [B]: cache position of ids[b, 0]
	valid     *Node // int32 [B]: how many of the S ids of each row are real
	positions *Node // int32 [B, S]: start + 0..S-1
	real      *Node // bool [B, S]: the first valid rows (padding rows must not change a recurrent state)
	causal    *Node // bool [B, S, Lb]: slot j is visible from row i (j ≤ positions[b, i])
	// cached says the layers read and write a cache (the state they are given); without one
	// (training) they attend over the chunk's own keys and start from empty recurrent states.
	cached bool
	// recompute marks each layer's input as a gradient checkpoint (training): the backward pass
	// recomputes a layer's activations from it instead of keeping them.
	recompute bool
}

// layerInput is a decoder layer's input: a gradient checkpoint with recompute.
func (s *step) layerInput(hidden *Node) *Node {
	if s.recompute {
		return hidden.Checkpoint()
	}
	return hidden
}

// layersOutput is the last layer's output: the end of the checkpointed blocks with recompute.
func (s *step) layersOutput(hidden *Node) *Node {
	if s.recompute {
		return hidden.StopCheckpoint()
	}
	return hidden
}

// newStep builds a step for ids [B, S] starting at start [B] with valid [B] real rows, attending
// over Lb = attend cache slots (cached) or over the chunk itself.
func newStep(o ops, ids, start, valid *Node, attend int, cached bool) *step {
	g := ids.Graph()
	batch, seqLen := ids.Shape().Dimensions[0], ids.Shape().Dimensions[1]
	offsets := Iota(g, shapes.Make(dtypes.Int32, batch, seqLen), 1) // [B, S]: 0..S-1
	positions := Add(InsertAxes(start, -1), offsets)
	keyPos := Iota(g, shapes.Make(dtypes.Int32, batch, seqLen, attend), 2)
	return &step{
		ops:       o,
		ids:       ids,
		start:     start,
		valid:     valid,
		positions: positions,
		real:      LessThan(offsets, InsertAxes(valid, -1)),
		causal:    LessOrEqual(keyPos, InsertAxes(positions, -1)), // [B, S, Lb]
		cached:    cached,
	}
}

// forward runs an architecture's layers and returns the hidden state after the last one
// [B, S, d] and the new state.
func forward(a architecture, s *step, w weightSet, state []*Node) (*Node, []*Node) {
	hiddens, newState := a.layers(s, w, state)
	return hiddens[len(hiddens)-1], newState
}

// stepInputs are the non-weight inputs of the step graph, in order, for a batch of B sequences.
const (
	inIDs       = iota // int32 [B, S]: token IDs, padded
	inStart            // int32 [B]: cache position of ids[b, 0]
	inValid            // int32 [B]: how many of the S ids of each row are real
	inKeyPos           // int32 [Lb]: 0..Lb-1, the cache slots attended to (its length sets Lb)
	inLogitRows        // int32 [B, P]: rows of each sequence's chunk whose logits are returned
	numStepInputs
)

// stepGraph builds the decoder step. inputs: the step inputs above, then the weights in the
// order of the weight table (m.specs), then each sequence's cache state in turn (the
// architecture's stateSpecs, no batch axis; all of one capacity). Outputs: logits [B·P, vocab] in
// float32, then each sequence's updated state in the same order.
func (m *Model) stepGraph(g *Graph, inputs []*Node) []*Node {
	ids, start, valid := inputs[inIDs], inputs[inStart], inputs[inValid]
	keyPos, logitRows := inputs[inKeyPos], inputs[inLogitRows]
	w := newWeightSet(m.specs, m.layout, inputs[numStepInputs:numStepInputs+len(m.specs)])
	w.adapter = m.adapter.nodes(g)
	caches := inputs[numStepInputs+len(m.specs):]
	batch, seqLen := ids.Shape().Dimensions[0], ids.Shape().Dimensions[1]
	nState := len(caches) / batch

	// The sequences' states stacked on a batch axis.
	state := make([]*Node, nState)
	for i := range state {
		if batch == 1 {
			state[i] = InsertAxes(caches[i], 0)
			continue
		}
		parts := make([]*Node, batch)
		for b := range parts {
			parts[b] = caches[b*nState+i]
		}
		state[i] = Stack(parts, 0)
	}
	s := newStep(ops{layout: m.layout, vocab: m.shape.Vocab}, ids, start, valid, keyPos.Shape().Dimensions[0], true)
	hidden, newState := forward(m.arch, s, w, state)

	// Only the rows that need logits go through the final norm and the vocabulary projection.
	wanted := logitRows.Shape().Dimensions[1]
	flatRows := Add(logitRows, MulScalar(Iota(g, logitRows.Shape(), 0), seqLen))                                     // [B, P] into [B·S]
	hidden = Gather(Reshape(hidden, batch*seqLen, hidden.Shape().Dimensions[2]), Reshape(flatRows, batch*wanted, 1)) // [B·P, d]
	outputs := []*Node{ConvertDType(m.arch.logits(s, w, hidden), dtypes.Float32)}
	for b := range batch {
		for _, t := range newState {
			if batch > 1 {
				t = SliceAxis(t, 0, AxisElem(b))
			}
			outputs = append(outputs, Squeeze(t, 0))
		}
	}
	return outputs
}
