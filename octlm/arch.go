package octlm

// The architecture seam: what one model family brings (its shape, its named weight table, what
// its cache holds per layer, and its layers), behind one small interface. Everything else in the
// package (loading, chunked prefill, the cache's buckets, batches, generation, parity, the
// training forward) runs any architecture without knowing which. Qwen3 (qwen3.go) and Qwen3.5
// (qwen35.go, qwen35_graph.go) implement it; registry.go finds one by config.json's model_type;
// docs/decoder.md says what a third touches.

import (
	"fmt"
	"slices"

	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // the graph DSL reads best unqualified
)

// architecture is one model family's decoder.
type architecture interface {
	// shape is the small shape the shared machinery reads (and ReadShape returns); the
	// architecture's own config stays its own (Qwen3's Config, Qwen35Config).
	shape() Shape
	// sizeNames are the checkpoint names the config's sizes are checked against before the
	// weight table is built: the embedding's (and its stored copies'), [vocab, d], and the prefix
	// of the numbered layers ("model.layers."), NLayers of them.
	sizeNames() (embedding []string, layers string)
	// weights is the named weight table, in the order the graph takes them: every checkpoint
	// tensor the model needs, declared once (name, stored shape, kind).
	weights() []weightSpec
	// skip reports checkpoint tensors the model ignores (another modality's tower); any other
	// tensor missing from weights is an error.
	skip(name string) bool
	// state is what the cache holds, in order, for a cache of capacity positions: per layer
	// either keys/values indexed by position or a fixed-size recurrent state.
	state() []stateSpec
	// layers runs the decoder on one chunk: the embedding and every layer. It returns the
	// hidden state [B, S, d] after the embedding and after each layer (NLayers+1 of them, the
	// last before the final norm; the trace compares them all), and the new cache state, one
	// node per stateSpec with a leading batch axis (nil without a cache: s.cached false): for a
	// fixed-size state the new state, same shape and dtype as the one given in state; for a
	// position-indexed one (given as blocks in s.kv, nil in state) the chunk's S new rows, laid
	// out as the layout stores the state (Layout.stateSpecs: values transposed with CacheLeft).
	layers(s *step, w weightSet, state []*Node) (hiddens, newState []*Node)
	// logits is the final norm and the output head on the rows that want logits, hidden
	// [P, d]: [P, vocab].
	logits(s *step, w weightSet, hidden *Node) *Node
}

// Shape is a decoder's shape as the shared machinery reads it, whatever the architecture.
type Shape struct {
	Vocab   int // tokens in the vocabulary (embedding rows)
	Context int // context length (max_position_embeddings)
	Width   int // hidden size d
	Heads   int // attention heads (of a full-attention layer)
	Layers  int // decoder layers
}

// weightKind says how a checkpoint tensor is laid out on the engine.
type weightKind int

const (
	vectorWeight weightKind = iota // as stored: norms, convolution kernels, per-head constants
	linearWeight                   // nn.Linear's weight: stored [out, in], resident [in, out] (or as stored: Layout.LinearRows)
	tableWeight                    // an embedding table [vocab, d], also an output head: rows or columns (Layout.TableColumns)
)

// weightSpec declares one checkpoint tensor the model reads.
type weightSpec struct {
	Name  string // checkpoint name, with any prefix (model.language_model.…)
	Shape []int  // shape in the checkpoint: Linear weights are [out, in]
	Kind  weightKind
	// Float32 keeps the weight in float32 whatever the model's dtype (a recurrent state's
	// parameters: A_log, dt_bias; norms an architecture wants in float32).
	Float32 bool
	// Copy is another checkpoint name for the same tensor (a tied head's lm_head.weight): if
	// stored, it must equal this one, and either alone suffices.
	Copy string
	// Fuse names a group of Linear weights of the same input that a layout with
	// FuseProjections keeps as one resident weight, their outputs side by side (q/k/v,
	// gate/up): consecutive specs with the same Fuse. The graph multiplies them with
	// ops.projections.
	Fuse string
	// Parts, in a resident spec made by fusing (see residentSpecs), are the checkpoint tensors
	// it holds, in output order; Name is then the group's Fuse and Shape [Σ out, in].
	Parts []weightSpec
	// Of, in a resident spec made by splitting (Layout.PieceMACs, see residentSpecs), is the
	// checkpoint weight [out, in] (a Linear weight or a table) whose rows First..First+Shape[0]−1
	// this piece holds, Shape being [n, in]; resident as a whole weight of its kind would be (a
	// Linear piece [in, n] unless Layout.LinearRows, a table's piece as rows). The pieces of one
	// weight are consecutive specs, in output order, and Name is Of#k.
	Of    string
	First int
}

// residentSpecs is the weight table as the engine holds it under layout l in a model of dtype: specs as they are,
// or with each Fuse group of Linear weights merged into one spec whose Parts they are, or with
// each Linear weight split into pieces (Layout.PieceMACs).
func residentSpecs(specs []weightSpec, l Layout, dtype DType) []weightSpec {
	if l.PieceMACs > 0 {
		return l.pieceSpecs(specs, dtype)
	}
	if !l.FuseProjections {
		return specs
	}
	var out []weightSpec
	for i := 0; i < len(specs); {
		j := i + 1
		for j < len(specs) && specs[i].Fuse != "" && specs[j].Fuse == specs[i].Fuse {
			j++
		}
		if j-i == 1 {
			out = append(out, specs[i])
			i = j
			continue
		}
		fused := weightSpec{Name: specs[i].Fuse, Kind: linearWeight, Float32: specs[i].Float32,
			Shape: []int{0, specs[i].Shape[1]}, Parts: specs[i:j:j]}
		for _, part := range fused.Parts {
			fused.Shape[0] += part.Shape[0]
		}
		out = append(out, fused)
		i = j
	}
	return out
}

// residentShape is the weight's shape on the engine under layout l.
func (s weightSpec) residentShape(l Layout) []int {
	if s.panels(l) {
		n, in := s.Shape[0], s.Shape[1]
		return []int{n / l.PiecePanels, in, l.PiecePanels}
	}
	switch s.Kind {
	case linearWeight:
		if l.LinearRows {
			return slices.Clone(s.Shape)
		}
		return []int{s.Shape[1], s.Shape[0]}
	case tableWeight:
		return l.tableShape(s.Shape[0], s.Shape[1])
	}
	return slices.Clone(s.Shape)
}

// panels reports whether the weight is a piece (of a Linear weight, or of a table stored as
// rows) resident as panels (Layout.PiecePanels).
func (s weightSpec) panels(l Layout) bool {
	return s.Of != "" && l.PiecePanels > 0 && s.Shape[0]%l.PiecePanels == 0
}

// panelIndex is where element i of row r of a piece [n, in] lies in the piece as panels of w
// columns, [n/w, in, w] (Layout.PiecePanels): panel r/w, its row i, its column r%w.
func panelIndex(r, i, in, w int) int { return (r/w*in+i)*w + r%w }

// stateSpec declares one tensor of the cache.
type stateSpec struct {
	Name string // for errors: "layers.3.k"
	// Dims is the shape; for a position-indexed state the dimension at PosAxis is the capacity
	// and its value here is ignored.
	Dims []int
	// PosAxis is the axis indexed by cache position, or -1 for a fixed-size state (a recurrent
	// or convolution state) that does not grow with capacity and cannot be truncated.
	PosAxis int
	// Float32 stores the state in float32 whatever the cache's dtype (a recurrent state).
	Float32 bool
	// Values marks attention's values, declared [kvHeads, positions, hd]: a layout may store them
	// transposed, [kvHeads, hd, positions] (Layout.CacheLeft, see Layout.stateSpecs).
	Values bool
	// Keys marks attention's keys, declared [kvHeads, positions, hd]: a layout may store them
	// transposed too (Layout.KeysTransposed).
	Keys bool
}

// shape is the state's shape for a cache of the given capacity.
func (s stateSpec) shape(capacity int) []int {
	dims := slices.Clone(s.Dims)
	if s.PosAxis >= 0 {
		dims[s.PosAxis] = capacity
	}
	return dims
}

// weightSet is the graph's weight parameters by checkpoint name.
type weightSet struct {
	byName  map[string]*Node
	rows    bool                 // Linear weights are resident as stored, [out, in] (Layout.LinearRows)
	parts   map[string]fusedPart // checkpoint names held inside a fused resident weight
	pieces  map[string]pieceSet  // checkpoint names held in pieces (Layout.PieceMACs)
	prefix  string
	adapter *LoRANodes // applied unmerged by ops.projections; nil: none
}

// pieceSet is a weight's resident pieces (Layout.PieceMACs), in output order, and the axis
// their outputs lie along: 0 for pieces of rows [n, in] (tables, Linear weights with
// Layout.LinearRows), 1 for pieces of columns [in, n].
type pieceSet struct {
	nodes []*Node
	axis  int
}

// fusedPart is where a checkpoint Linear weight lies in a fused resident weight [in, Σ out]:
// its columns offset..offset+width-1 (with Layout.LinearRows, its rows of [Σ out, in]).
type fusedPart struct {
	fused         string
	offset, width int
}

// newWeightSet binds the resident weights (specs, the engine's table under layout l) to their
// graph nodes.
func newWeightSet(specs []weightSpec, l Layout, nodes []*Node) weightSet {
	w := weightSet{byName: make(map[string]*Node, len(specs)), parts: map[string]fusedPart{}, pieces: map[string]pieceSet{}, rows: l.LinearRows}
	for i, s := range specs {
		if s.Of != "" {
			p := w.pieces[s.Of]
			p.nodes = append(p.nodes, nodes[i])
			if s.Kind == linearWeight && !l.LinearRows {
				p.axis = 1
			}
			w.pieces[s.Of] = p
			continue
		}
		w.byName[s.Name] = nodes[i]
		offset := 0
		for _, part := range s.Parts {
			w.parts[part.Name] = fusedPart{fused: s.Name, offset: offset, width: part.Shape[0]}
			offset += part.Shape[0]
		}
	}
	return w
}

// get is the weight named prefix+name. A name the table does not declare is a bug in the
// architecture, reported when the graph is built. A part of a fused weight is its columns
// (ops.projections multiplies a whole group at once instead).
func (w weightSet) get(name string) *Node {
	if n, ok := w.byName[w.prefix+name]; ok {
		return n
	}
	if p, ok := w.parts[w.prefix+name]; ok {
		return SliceAxis(w.byName[p.fused], w.outAxis(), AxisRange(p.offset, p.offset+p.width))
	}
	if p, ok := w.pieces[w.prefix+name]; ok {
		parts := make([]*Node, len(p.nodes))
		for i, n := range p.nodes {
			parts[i] = unpanel(n, p.axis)
		}
		return concatenate(parts, p.axis) // a copy: ops.projections multiplies the pieces instead
	}
	panic(fmt.Sprintf("octlm: the graph asks for weight %q, which the weight table does not declare", w.prefix+name))
}

// unpanel is a piece as its weight's other pieces lie: a piece of panels [n/w, in, w]
// (Layout.PiecePanels) as rows [n, in] (outAxis 0) or columns [in, n] (outAxis 1); any other
// piece as it is.
func unpanel(piece *Node, outAxis int) *Node {
	if piece.Rank() != 3 {
		return piece
	}
	d := piece.Shape().Dimensions
	if outAxis == 0 {
		return Reshape(TransposeAllAxes(piece, 0, 2, 1), d[0]*d[2], d[1])
	}
	return Reshape(TransposeAllAxes(piece, 1, 0, 2), d[1], d[0]*d[2])
}

// table is the table named prefix+name as its resident pieces of rows (Layout.PieceMACs), or
// the whole table alone.
func (w weightSet) table(name string) []*Node {
	if p, ok := w.pieces[w.prefix+name]; ok {
		return p.nodes
	}
	return []*Node{w.get(name)}
}

// fused is the resident weight that holds exactly the weights names, in this order, and their
// widths, if the layout fused them.
func (w weightSet) fused(names []string) (*Node, []int, bool) {
	widths := make([]int, len(names))
	offset := 0
	var fused string
	for i, name := range names {
		p, ok := w.parts[w.prefix+name]
		if !ok || p.offset != offset || (i > 0 && p.fused != fused) {
			return nil, nil, false
		}
		fused, widths[i], offset = p.fused, p.width, offset+p.width
	}
	n := w.byName[fused]
	if n.Shape().Dimensions[w.outAxis()] != offset {
		return nil, nil, false
	}
	return n, widths, true
}

// outAxis is the output axis of a resident Linear weight: 1 of [in, out], 0 as stored.
func (w weightSet) outAxis() int {
	if w.rows {
		return 0
	}
	return 1
}

// under is the same set with names relative to prefix+p ("model.layers.3.").
func (w weightSet) under(p string) weightSet {
	w.prefix += p
	return w
}
