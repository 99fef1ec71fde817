package octlm

// LoRA applied unmerged, as PEFT's LoraLayer computes it:
// y = x·Wᵀ + scale·(dropout(x)·Aᵀ)·Bᵀ, with A [r, in] and B [out, r].

import (
	"fmt"

	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // the graph DSL reads best unqualified
	"github.com/gomlx/gomlx/core/tensors"
)

// LoRANodes are LoRA adapters as graph nodes, applied unmerged to the Linear weights they name.
type LoRANodes struct {
	// Scale is PEFT's scaling, lora_alpha / r (or / √r with rsLoRA).
	Scale float64
	// Modules are the adapters keyed by the Linear weight's checkpoint name
	// (WeightInfo.Name: model.layers.0.self_attn.q_proj.weight).
	Modules map[string]LoRAPair
	// Dropout, if not nil, is applied to x before A (training).
	Dropout func(x *Node) *Node
}

// LoRAPair is one adapter: A [r, in] and B [out, r], float32.
type LoRAPair struct{ A, B *Node }

// add is y + scale·(dropout(x)·Aᵀ)·Bᵀ for the adapter on the Linear weight name, or y where there
// is none. x [..., in], y [..., out]; the adapter runs in its own dtype, as PEFT casts x to it.
func (l *LoRANodes) add(y, x *Node, name string) *Node {
	if l == nil {
		return y
	}
	p, ok := l.Modules[name]
	if !ok {
		return y
	}
	x = ConvertDType(x, p.A.DType())
	if l.Dropout != nil {
		x = l.Dropout(x)
	}
	// The products on rows [rows, in]: with x [B, S, in] the gradient of B would contract the
	// incoming gradient [B, S, out] on two leading axes, which GoMLX's pure-Go backend
	// (compute v0.1.14) transposes to [out, B, S] element by element (its generic transpose);
	// on [rows, out] that transpose is its blocked 2-D one.
	in := x.Shape().Dimensions[x.Rank()-1]
	rows := Reshape(x, x.Shape().Size()/in, in)
	xa := DotGeneral(rows, []int{1}, nil, p.A, []int{1}, nil)  // [rows, r]
	delta := DotGeneral(xa, []int{1}, nil, p.B, []int{1}, nil) // [rows, out]
	delta = Reshape(delta, y.Shape().Dimensions...)
	return Add(y, ConvertDType(MulScalar(delta, l.Scale), y.DType()))
}

// LoRA is an adapter applied unmerged at inference (LoadOptions.Adapter): in every step graph
// (generate, chat, parity, bench, eval) each named Linear adds scale·(x·Aᵀ)·Bᵀ to its output.
type LoRA struct {
	// Scale is PEFT's scaling, lora_alpha / r (or / √r with rsLoRA).
	Scale float64
	// Modules are the adapters keyed by the Linear weight's checkpoint name
	// (model.layers.0.self_attn.q_proj.weight).
	Modules map[string]LoRAMatrices
}

// LoRAMatrices is one adapter in float32, row-major: A [Rank, In], B [Out, Rank].
type LoRAMatrices struct {
	A, B          []float32
	Rank, In, Out int
}

// check validates the adapter against the weight table: every module a Linear weight of the
// table, its sizes the weight's, A and B of those sizes.
func (l *LoRA) check(specs []weightSpec) error {
	linear := map[string][]int{}
	for _, s := range specs {
		for _, p := range append([]weightSpec{s}, s.Parts...) {
			if p.Kind == linearWeight && len(p.Parts) == 0 {
				linear[p.Name] = p.Shape
			}
		}
	}
	for name, m := range l.Modules {
		shape, ok := linear[name]
		switch {
		case !ok:
			return fmt.Errorf("octlm: adapter module %q: not a Linear weight of this model: %w", name, ErrBadInput)
		case m.In != shape[1] || m.Out != shape[0]:
			return fmt.Errorf("octlm: adapter module %q: %d → %d, the weight is [%d, %d]: %w", name, m.In, m.Out, shape[0], shape[1], ErrBadInput)
		case m.Rank <= 0 || len(m.A) != m.Rank*m.In || len(m.B) != m.Out*m.Rank:
			return fmt.Errorf("octlm: adapter module %q: rank %d with %d A and %d B values (want %d and %d): %w",
				name, m.Rank, len(m.A), len(m.B), max(m.Rank, 0)*m.In, m.Out*max(m.Rank, 0), ErrBadInput)
		}
	}
	return nil
}

// nodes are the adapter as constants of graph g; nil for no adapter.
func (l *LoRA) nodes(g *Graph) *LoRANodes {
	if l == nil || len(l.Modules) == 0 {
		return nil
	}
	n := &LoRANodes{Scale: l.Scale, Modules: make(map[string]LoRAPair, len(l.Modules))}
	for name, m := range l.Modules {
		n.Modules[name] = LoRAPair{
			A: Const(g, tensors.FromFlatDataAndDimensions(m.A, m.Rank, m.In)),
			B: Const(g, tensors.FromFlatDataAndDimensions(m.B, m.Out, m.Rank)),
		}
	}
	return n
}
