package train

import (
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // the graph DSL reads best unqualified
)

// Param is one weight of the model being trained, in checkpoint layout: its checkpoint name,
// shape, whether it is an nn.Linear weight [out, in] (a LoRA target) and, for one, PEFT's module
// path (model.layers.0.self_attn.q_proj).
type Param struct {
	Name   string
	Shape  []int
	Linear bool
	Module string
}

// Size is the number of values of p.
func (p Param) Size() int {
	n := 1
	for _, d := range p.Shape {
		n *= d
	}
	return n
}

// Adapters are LoRA matrices applied unmerged in the forward, y = x·Wᵀ + Scale·(drop(x)·Aᵀ)·Bᵀ,
// keyed by the Linear's Param.Name: [0] is A [r, in], [1] is B [out, r].
type Adapters struct {
	Scale   float64
	Modules map[string][2]*Node
	// Dropout is applied to x before A (nil: none).
	Dropout func(x *Node) *Node
}

// Model is the differentiable forward the loop trains: the decoder's TrainingLogits
// (FromDecoder) or, in tests, a small stand-in.
type Model interface {
	// Params are the weights Logits reads, in the order it takes them.
	Params() []Param
	// Logits builds float32 logits [B, S, vocab] for right-padded ids [B, S] (int32) whose rows
	// have lengths [B] real tokens, from weights (one node per Params entry, float32) and
	// adapters (nil: none). Real positions never see the padding.
	Logits(ids, lengths *Node, weights []*Node, adapters *Adapters) *Node
}

// LossSum is transformers' causal-LM loss before its division: the summed negative
// log-likelihood of the targets (labels already shifted, IgnoreIndex not counted) under
// logits [B, S, V], and the number of targets counted, both float32 scalars.
func LossSum(logits, targets *Node) (sum, count *Node) {
	vocab := logits.Shape().Dimensions[logits.Rank()-1]
	counted := GreaterOrEqual(targets, ZerosLike(targets))
	safe := Where(counted, targets, ZerosLike(targets))
	logp := LogSoftmax(logits, -1)
	picked := ReduceSum(Mul(logp, OneHot(safe, vocab, logits.DType())), -1)
	nll := Where(counted, Neg(picked), ZerosLike(picked))
	return ReduceAllSum(nll), ReduceAllSum(ConvertDType(counted, logits.DType()))
}
