package train

import (
	"math"
	"math/rand/v2"
	"testing"

	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // the graph DSL reads best unqualified
	"github.com/gomlx/gomlx/core/tensors"
)

// plainLossSum is the loss written as transformers computes it, log_softmax and a one-hot pick,
// differentiated by GoMLX's own rules: LossSum's closed-form gradient must equal its gradient.
func plainLossSum(logits, targets *Node) *Node {
	vocab := logits.Shape().Dimensions[logits.Rank()-1]
	counted := GreaterOrEqual(targets, ZerosLike(targets))
	safe := Where(counted, targets, ZerosLike(targets))
	picked := ReduceSum(Mul(LogSoftmax(logits, -1), OneHot(safe, vocab, logits.DType())), -1)
	return ReduceAllSum(Where(counted, Neg(picked), ZerosLike(picked)))
}

// TestLossSumGradient checks LossSum's value, count and closed-form gradient against the plain
// formula in float64, with ignored targets, for the loss itself and for a function of it (the
// gradient arriving at the sum is not 1).
func TestLossSumGradient(t *testing.T) {
	b := backendForTest(t)
	const batch, seqLen, vocab = 2, 5, 7
	rng := rand.New(rand.NewPCG(3, 4))
	logits := make([]float64, batch*seqLen*vocab)
	for i := range logits {
		logits[i] = rng.NormFloat64() * 3
	}
	targets := make([]int32, batch*seqLen)
	for i := range targets {
		targets[i] = int32(rng.IntN(vocab))
	}
	targets[2], targets[7], targets[9] = IgnoreIndex, IgnoreIndex, IgnoreIndex
	for _, tc := range []struct {
		name  string
		scale float64 // the gradient is taken of scale · sum
	}{{"sum", 1}, {"scaled", -2.5}} {
		t.Run(tc.name, func(t *testing.T) {
			exec, err := NewExec(b, func(x, y *Node) []*Node {
				sum, count := LossSum(x, y)
				want := plainLossSum(x, y)
				return []*Node{sum, count, want, Gradient(MulScalar(sum, tc.scale), x)[0], Gradient(MulScalar(want, tc.scale), x)[0]}
			})
			if err != nil {
				t.Fatal(err)
			}
			defer exec.Finalize()
			outs, err := exec.Call(tensors.FromFlatDataAndDimensions(logits, batch, seqLen, vocab), tensors.FromFlatDataAndDimensions(targets, batch, seqLen))
			if err != nil {
				t.Fatal(err)
			}
			get := func(i int) []float64 {
				v, err := tensors.CopyFlatData[float64](outs[i])
				if err != nil {
					t.Fatal(err)
				}
				return v
			}
			sum, count, want := get(0)[0], get(1)[0], get(2)[0]
			if count != 7 {
				t.Errorf("count %v, want 7", count)
			}
			if math.Abs(sum-want) > 1e-12*math.Abs(want) {
				t.Errorf("loss sum %.17g, the plain formula %.17g", sum, want)
			}
			got, ref := get(3), get(4)
			for i := range ref {
				if math.Abs(got[i]-ref[i]) > 1e-14 {
					t.Fatalf("gradient entry %d: %.17g, the plain formula's %.17g", i, got[i], ref[i])
				}
			}
		})
	}
}
