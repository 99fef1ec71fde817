package octlm

// LoRA applied unmerged, as PEFT's LoraLayer computes it:
// y = x·Wᵀ + scale·(dropout(x)·Aᵀ)·Bᵀ, with A [r, in] and B [out, r].

import (
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // the graph DSL reads best unqualified
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
	xa := DotGeneral(x, []int{x.Rank() - 1}, nil, p.A, []int{1}, nil)      // [..., r]
	delta := DotGeneral(xa, []int{xa.Rank() - 1}, nil, p.B, []int{1}, nil) // [..., out]
	return Add(y, ConvertDType(MulScalar(delta, l.Scale), y.DType()))
}
