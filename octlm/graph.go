package octlm

// The step graph every architecture runs in: it takes a chunk of S token IDs (padded to a
// length bucket; only the first `valid` are real) that start at cache position `start`, hands
// them with the weights and the cache state to the architecture, and returns logits for the
// rows listed in logitRows only, then the chunk's new keys and values ([B, kvHeads, S, hd] per
// layer, which the host writes into the cache's blocks in place, see Cache.writeRows) and each
// recurrent state advanced by the valid rows. Attention reads the cache's blocks that cover
// positions [0, start) (T slots ≥ start, see Cache.covering) as read-only inputs, masked to the
// slots below each sequence's start, and the chunk's own keys, causal: nothing in the graph
// writes or copies the cache. A long prompt runs as several such steps (see Model.run).
//
// The architectures' layer code runs on a batch axis ([B, S, …]); the step graph runs B
// sequences, each reading its own cache, and the training forward (training.go) B
// right-padded rows without a cache.

import (
	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/shapes"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // the graph DSL reads best unqualified
)

// step is one chunk of B sequences as an architecture's layers see it: S token IDs per row
// (padded; only the first valid[b] are real) starting at cache position start[b], attending over
// T cache slots (those below start[b]) and the chunk itself, or, without a cache (training), over
// the chunk itself (T = 0).
type step struct {
	ops       ops   // the engine's layout: products, lookups, rsqrt
	ids       *Node // int32 [B, S]: token IDs, padded with zeros (nil where embedded is set)
	embedded  *Node // [B, S, d]: the embeddings of ids looked up on the host (Layout.HostEmbed), or nil
	start     *Node // int32 [B]: cache position of ids[b, 0]
	valid     *Node // int32 [B]: how many of the S ids of each row are real
	positions *Node // int32 [B, S]: start + 0..S-1
	real      *Node // bool [B, S]: the first valid rows (padding rows must not change a recurrent state)
	// causal is bool [B, S, T+S]: what row i sees, the cache's slot t < start[b] (t < T), then
	// the chunk's own row j ≤ i.
	causal *Node
	// cached says the layers read a cache (kv, and the fixed-size states they are given) and
	// return the chunk's new state; without one (training) they attend over the chunk's own keys
	// and start from empty recurrent states.
	cached bool
	// kv is, per state spec, the blocks of a position-indexed state (nil for a fixed-size one).
	kv []kvBlocks
	// kvDType is the dtype of the cache's position-indexed state: the chunk's keys and values
	// are rounded to it before they are attended, as the cache holds them.
	kvDType dtypes.DType
	// recompute marks each layer's input as a gradient checkpoint (training): the backward pass
	// recomputes a layer's activations from it instead of keeping them.
	recompute bool
	// hostFns are the graph's functions run in Go as attention (Layout.HostAttention) or as a
	// gated activation (Layout.HostGated), by the shapes of their arguments.
	hostFns map[string]*Function
	// biases are the mask as a bias, by dtype (maskBias).
	biases map[dtypes.DType]*Node
}

// embed is the chunk's token embeddings [B, S, d]: those the host looked up, else the rows of
// w's table name for ids (ops.embed; a table in pieces is put back together first).
func (s *step) embed(w weightSet, name string) *Node {
	if s.embedded != nil {
		return s.embedded
	}
	return s.ops.embed(w.get(name), s.ids)
}

// kvAt is the blocks of position-indexed state spec i (nil without a cache).
func (s *step) kvAt(i int) kvBlocks {
	if s.kv == nil {
		return nil
	}
	return s.kv[i]
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

// kvBlocks is one position-indexed cache state as the step graph reads it: per sequence of the
// batch, the cache's blocks covering slots [0, T) in order, each [dims before the position
// axis…, block size, dims after] (Qwen3: [kvHeads, n, hd]).
type kvBlocks [][]*Node

// newStep builds a step for ids [B, S] starting at start [B] with valid [B] real rows, attending
// over slots cache slots (below start) and the chunk itself. ids may instead be the chunk's
// embeddings [B, S, d] (Layout.HostEmbed): then they are the step's embedded and ids is nil.
func newStep(o ops, ids, start, valid *Node, slots int, cached bool) *step {
	g := ids.Graph()
	batch, seqLen := ids.Shape().Dimensions[0], ids.Shape().Dimensions[1]
	offsets := Iota(g, shapes.Make(dtypes.Int32, batch, seqLen), 1) // [B, S]: 0..S-1
	positions := Add(InsertAxes(start, -1), offsets)
	square := shapes.Make(dtypes.Int32, batch, seqLen, seqLen)
	causal := LessOrEqual(Iota(g, square, 2), Iota(g, square, 1)) // [B, S, S]: j ≤ i
	if slots > 0 {
		slot := Iota(g, shapes.Make(dtypes.Int32, batch, seqLen, slots), 2)
		past := LessThan(slot, Reshape(start, batch, 1, 1)) // [B, S, T]
		causal = Concatenate([]*Node{past, causal}, 2)
	}
	s := &step{
		ops:       o,
		ids:       ids,
		start:     start,
		valid:     valid,
		positions: positions,
		real:      LessThan(offsets, InsertAxes(valid, -1)),
		causal:    causal,
		cached:    cached,
	}
	if ids.Rank() == 3 {
		s.ids, s.embedded = nil, ids
	}
	return s
}

// forward runs an architecture's layers and returns the hidden state after the last one
// [B, S, d] and the new state.
func forward(a architecture, s *step, w weightSet, state []*Node) (*Node, []*Node) {
	hiddens, newState := a.layers(s, w, state)
	return hiddens[len(hiddens)-1], newState
}

// stepInputs are the non-weight inputs of the step graph, in order, for a batch of B sequences.
const (
	inIDs       = iota // int32 [B, S]: token IDs, padded; with Layout.HostEmbed their embeddings [B, S, d]
	inStart            // int32 [B]: cache position of ids[b, 0]
	inValid            // int32 [B]: how many of the S ids of each row are real
	inLogitRows        // int32 [B, P]: rows of each sequence's chunk whose logits are returned
	numStepInputs
)

// stepGraph builds the decoder step for a cache whose position-indexed state is kvDType.
// inputs: the step inputs above, then the weights in the order of the weight table (m.specs),
// then each sequence's cache state in turn, the architecture's stateSpecs in order: a fixed-size
// state as one input (no batch axis), a position-indexed one as its first k blocks (k the same
// for every spec and sequence). Outputs: logits [B·P, vocab] in float32, then for each
// position-indexed spec the chunk's new rows [B, …, S, …] in kvDType, then each sequence's new
// fixed-size states in spec order.
func (m *Model) stepGraph(g *Graph, inputs []*Node, kvDType dtypes.DType) []*Node {
	ids, start, valid, logitRows := inputs[inIDs], inputs[inStart], inputs[inValid], inputs[inLogitRows]
	w := newWeightSet(m.specs, m.layout, inputs[numStepInputs:numStepInputs+len(m.specs)])
	w.adapter = m.adapter.nodes(g)
	caches := inputs[numStepInputs+len(m.specs):]
	batch, seqLen := ids.Shape().Dimensions[0], ids.Shape().Dimensions[1]
	specs := m.stateSpecs()
	fixed, positional := 0, 0
	for _, spec := range specs {
		if spec.PosAxis < 0 {
			fixed++
		} else {
			positional++
		}
	}
	perSeq := len(caches) / batch
	numBlocks := 0
	if positional > 0 {
		numBlocks = (perSeq - fixed) / positional
	}

	// Each sequence's blocks as they are, its fixed-size states stacked on a batch axis.
	kv := make([]kvBlocks, len(specs))
	fixedParts := make([][]*Node, len(specs))
	slots := 0
	for b := range batch {
		at := b * perSeq
		for i, spec := range specs {
			if spec.PosAxis < 0 {
				fixedParts[i] = append(fixedParts[i], caches[at])
				at++
				continue
			}
			kv[i] = append(kv[i], caches[at:at+numBlocks])
			if b == 0 && slots == 0 {
				for _, block := range caches[at : at+numBlocks] {
					slots += block.Shape().Dimensions[spec.PosAxis]
				}
			}
			at += numBlocks
		}
	}
	state := make([]*Node, len(specs))
	for i, parts := range fixedParts {
		switch {
		case parts == nil:
		case batch == 1:
			state[i] = InsertAxes(parts[0], 0)
		default:
			state[i] = Stack(parts, 0)
		}
	}
	s := newStep(ops{layout: m.layout, vocab: m.shape.Vocab}, ids, start, valid, slots, true)
	s.kv, s.kvDType = kv, kvDType
	hidden, newState := forward(m.arch, s, w, state)

	// Only the rows that need logits go through the final norm and the vocabulary projection.
	wanted := logitRows.Shape().Dimensions[1]
	flatRows := Add(logitRows, MulScalar(Iota(g, logitRows.Shape(), 0), seqLen))                                     // [B, P] into [B·S]
	hidden = Gather(Reshape(hidden, batch*seqLen, hidden.Shape().Dimensions[2]), Reshape(flatRows, batch*wanted, 1)) // [B·P, d]
	outputs := []*Node{ConvertDType(m.arch.logits(s, w, hidden), dtypes.Float32)}
	for i, spec := range specs {
		if spec.PosAxis >= 0 {
			outputs = append(outputs, newState[i])
		}
	}
	for b := range batch {
		for i, spec := range specs {
			if spec.PosAxis >= 0 {
				continue
			}
			t := newState[i]
			if batch > 1 {
				t = SliceAxis(t, 0, AxisElem(b))
			}
			outputs = append(outputs, Squeeze(t, 0))
		}
	}
	return outputs
}
