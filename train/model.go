package train

import (
	"strings"

	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/shapes"

	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // the graph DSL reads best unqualified

	"github.com/octlm/octlm/octlm"
)

// Param is one weight of the model being trained, as the decoder declares it: checkpoint name
// and layout, whether it is an nn.Linear (a LoRA target) and PEFT's module path for one.
type Param = octlm.WeightInfo

// size is the number of values of p.
func size(p Param) int {
	n := 1
	for _, d := range p.Shape {
		n *= d
	}
	return n
}

// Adapters are LoRA matrices applied unmerged in the forward, as the decoder takes them.
type Adapters = octlm.LoRANodes

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
//
// Each counted position's loss is log Σ exp(x − m) − (x_t − m), m the row's maximum, as
// torch's log_softmax and nll_loss compute it; the target's logit is gathered, not picked by a
// one-hot product. The gradient with respect to the logits is written in closed form,
// (softmax − onehot(t)) times the gradient arriving at sum on counted positions, zero elsewhere:
// the backward then holds the logits and one tensor of their size, where differentiating the
// forward's operations held five of [B, S, V] (Qwen3's 151,936 entries at 256 positions are
// 155 MB each in float32).
func LossSum(logits, targets *Node) (sum, count *Node) {
	g := logits.Graph()
	dims := logits.Shape().Dimensions // [B, S, V]
	batch, seqLen := dims[0], dims[1]
	counted := GreaterOrEqual(targets, ZerosLike(targets))
	safe := Where(counted, targets, ZerosLike(targets))
	weight := ConvertDType(counted, logits.DType()) // [B, S]
	at := shapes.Make(dtypes.Int32, batch, seqLen, 1)
	indices := Concatenate([]*Node{Iota(g, at, 0), Iota(g, at, 1), Reshape(ConvertDType(safe, dtypes.Int32), batch, seqLen, 1)}, -1) // [B, S, 3]

	// upstream is the gradient arriving at sum: sum's own VJP (below) runs before the logits'
	// (it is the later node) and records it.
	var upstream, logSum *Node
	x := IdentityWithCustomGradient(logits, func(x, v *Node) *Node {
		if upstream == nil {
			return v // not reached through sum: the forward's operations' own gradient
		}
		w := Mul(weight, upstream)                                       // [B, S]
		p := Mul(Exp(Sub(x, InsertAxes(logSum, -1))), InsertAxes(w, -1)) // softmax · w
		upstream = nil
		return ScatterSum(p, indices, Neg(w), true, true) // − w at the targets
	})
	m := StopGradient(ReduceAndKeep(x, ReduceMax, -1))  // [B, S, 1]
	logSumShifted := Log(ReduceSum(Exp(Sub(x, m)), -1)) // log Σ exp(x − m), [B, S]
	logSum = Add(logSumShifted, Reshape(m, batch, seqLen))
	picked := Sub(Gather(x, indices, true), Reshape(m, batch, seqLen)) // x_t − m
	nll := Where(counted, Sub(logSumShifted, picked), ZerosLike(picked))
	sum = IdentityWithCustomGradient(ReduceAllSum(nll), func(_, v *Node) *Node {
		upstream = v
		return v
	})
	return sum, ReduceAllSum(weight)
}

// Vocab is the number of rows of the model's token embedding (0 if it has none).
func Vocab(m Model) int {
	for _, p := range m.Params() {
		if strings.HasSuffix(p.Name, "embed_tokens.weight") && len(p.Shape) == 2 {
			return p.Shape[0]
		}
	}
	return 0
}
