package octlm

// The step graph every architecture runs in: it takes a chunk of S token IDs (padded to a
// length bucket; only the first `valid` are real) that start at cache position `start`, hands
// them with the weights and the cache state to the architecture, which writes the chunk into
// the state (K/V at slots start..start+S-1, or a recurrent state advanced by the valid rows) and
// attends over the first Lb cache slots (Lb ≥ start+S, see attendLength), and returns logits for
// the rows listed in logitRows only. A long prompt runs as several such steps (see Model.run).

import (
	"github.com/gomlx/compute/dtypes"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // the graph DSL reads best unqualified
)

// stepInputs are the non-weight inputs of the step graph, in order.
const (
	inIDs       = iota // int32 [S]: token IDs, padded
	inStart            // int32 []: cache position of ids[0]
	inValid            // int32 []: how many of the S ids are real
	inKeyPos           // int32 [Lb]: 0..Lb-1, the cache slots attended to (its length sets Lb)
	inLogitRows        // int32 [P]: rows of the chunk whose logits are returned
	numStepInputs
)

// stepGraph builds the decoder step. inputs: the step inputs above, then the weights in the
// order of the weight table (m.specs), then the cache state (the architecture's stateSpecs).
// Outputs: logits [P, vocab] in float32, then the updated state in the same order.
func (m *Model) stepGraph(g *Graph, inputs []*Node) []*Node {
	ids, start, valid := inputs[inIDs], inputs[inStart], inputs[inValid]
	keyPos, logitRows := inputs[inKeyPos], inputs[inLogitRows]
	w := newWeightSet(m.specs, inputs[numStepInputs:numStepInputs+len(m.specs)])
	state := inputs[numStepInputs+len(m.specs):]

	offsets := Iota(g, ids.Shape(), 0) // [S]: 0..S-1
	positions := Add(start, offsets)   // [S]
	s := &step{
		ops:       ops{layout: m.layout, vocab: m.Config.VocabSize},
		ids:       ids,
		start:     start,
		valid:     valid,
		positions: positions,
		real:      LessThan(offsets, valid),
		keyPos:    keyPos,
		causal:    LessOrEqual(InsertAxes(keyPos, 0), InsertAxes(positions, -1)), // [S, Lb]
	}
	hidden, newState := m.arch.forward(s, w, state)

	// Only the rows that need logits go through the final norm and the vocabulary projection.
	hidden = Gather(hidden, InsertAxes(logitRows, -1)) // [P, d]
	logits := ConvertDType(m.arch.logits(s, w, hidden), dtypes.Float32)
	return append([]*Node{logits}, newState...)
}

// rmsNormalized is the part every RMSNorm shares: x · rsqrt(mean(x²) + eps) over the last axis,
// computed in float32 whatever x's dtype (the weight, and how it is applied, differ by norm).
func rmsNormalized(o ops, x *Node, eps float64) *Node {
	x32 := ConvertDType(x, dtypes.Float32)
	variance := ReduceAndKeep(Square(x32), ReduceMean, -1)
	return o.rsqrtMul(x32, AddScalar(variance, eps))
}
