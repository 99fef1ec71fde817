package octlm

import (
	"math"
	"testing"

	"github.com/gomlx/compute"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // the graph DSL reads best unqualified
	"github.com/gomlx/gomlx/core/tensors"

	"github.com/octlm/octlm/xla"
)

// TestSigmoidAccuracy holds ops.sigmoid, in each engine's layout, to a few float32 ulps relative
// to the logistic function over [−20, 20], the small results of the negative side included (SiLU
// feeds them to Qwen3.5's L2-normalised DeltaNet keys and queries). It logs the engine's own
// Sigmoid beside it: ONNX Runtime 1.30.0's is off by 2e-3 relative below −6 and by 4.5 near −18,
// which is why its layout builds the function from Exp.
func TestSigmoidAccuracy(t *testing.T) {
	skipNumericsUnderRace(t)
	const n = 40001
	xs := make([]float32, n)
	for i := range xs {
		xs[i] = float32(-20 + 40*float64(i)/float64(n-1))
	}
	logistic := func(x float64) float64 { return 1 / (1 + math.Exp(-x)) }
	silu := func(x float64) float64 { return x * logistic(x) }
	worstRelative := func(t *testing.T, backend compute.Backend, f func(x *Node) *Node, want func(float64) float64) (float64, float32) {
		t.Helper()
		exec, err := NewExec(backend, f)
		if err != nil {
			t.Fatal(err)
		}
		defer exec.Finalize()
		out, err := exec.Call(tensors.FromFlatDataAndDimensions(xs, n))
		if err != nil {
			t.Fatal(err)
		}
		got := tensors.MustCopyFlatData[float32](out[0])
		worst, at := 0.0, float32(0)
		for i, x := range xs {
			w := want(float64(x))
			if w == 0 {
				continue
			}
			if e := math.Abs(float64(got[i])-w) / math.Abs(w); e > worst || math.IsNaN(e) {
				worst, at = e, x
			}
		}
		return worst, at
	}
	const bar = 4.0 / (1 << 24) // 4 half-ulps of float32, 2.4e-7
	for _, tt := range []struct {
		name    string
		backend func(testing.TB) compute.Backend
		engine  xla.Engine
	}{
		{"go", goBackend, xla.EngineGo},
		{"onnx", onnxBackend, xla.EngineONNX},
	} {
		t.Run(tt.name, func(t *testing.T) {
			backend := tt.backend(t)
			o := ops{layout: LayoutFor(tt.engine)}
			own, ownAt := worstRelative(t, backend, Sigmoid, logistic)
			t.Logf("the engine's Sigmoid: worst relative error %.2g at %g", own, ownAt)
			for _, f := range []struct {
				name string
				f    func(x *Node) *Node
				want func(float64) float64
			}{{"sigmoid", o.sigmoid, logistic}, {"silu", o.silu, silu}} {
				got, at := worstRelative(t, backend, f.f, f.want)
				t.Logf("ops.%s: worst relative error %.2g at %g", f.name, got, at)
				if got > bar {
					t.Errorf("ops.%s: relative error %.3g at x = %g, want ≤ %.2g", f.name, got, at, bar)
				}
			}
		})
	}
}
