package train

import (
	"strings"

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
func LossSum(logits, targets *Node) (sum, count *Node) {
	vocab := logits.Shape().Dimensions[logits.Rank()-1]
	counted := GreaterOrEqual(targets, ZerosLike(targets))
	safe := Where(counted, targets, ZerosLike(targets))
	logp := LogSoftmax(logits, -1)
	picked := ReduceSum(Mul(logp, OneHot(safe, vocab, logits.DType())), -1)
	nll := Where(counted, Neg(picked), ZerosLike(picked))
	return ReduceAllSum(nll), ReduceAllSum(ConvertDType(counted, logits.DType()))
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
