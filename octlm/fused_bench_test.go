package octlm

import (
	"testing"
	"time"

	"github.com/gomlx/compute/dtypes"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // the graph DSL reads best unqualified
	"github.com/gomlx/gomlx/core/tensors"

	"github.com/octlm/octlm/xla"
)

// BenchmarkFusedProjections is the minimal reproduction for fusing q/k/v and gate/up: the
// products of Qwen3-0.6B's decode step alone (28 layers, one row, float32 weights as graph
// inputs), once as 7 products per layer and once with q/k/v and gate/up fused (5), alternated
// run by run, on each engine it finds. It reports milliseconds per step of each and their ratio.
func BenchmarkFusedProjections(b *testing.B) {
	const layers, d, qOut, kvOut, ff = 28, 1024, 2048, 1024, 3072
	for _, name := range []string{"go", "onnx"} {
		b.Run(name, func(b *testing.B) {
			backend, _, err := xla.Open(name)
			if err != nil {
				b.Skipf("%s: %v", name, err)
			}
			dt := dtypes.Float32
			x := randomTensor(b, dt, 1, d)
			layer := func(x, q, k, v, o, g, u, dn *Node) *Node {
				mm := func(a, w *Node) *Node { return DotGeneral(a, []int{1}, nil, w, []int{0}, nil) }
				h := Mul(mm(x, q), Concatenate([]*Node{mm(x, k), mm(x, v)}, 1))
				x = Add(x, mm(Tanh(h), o))
				return Add(x, mm(Mul(Sigmoid(mm(x, g)), mm(x, u)), dn))
			}
			fusedLayer := func(x, qkv, o, gu, dn *Node) *Node {
				mm := func(a, w *Node) *Node { return DotGeneral(a, []int{1}, nil, w, []int{0}, nil) }
				all := mm(x, qkv)
				q := SliceAxis(all, 1, AxisRange(0, qOut))
				k := SliceAxis(all, 1, AxisRange(qOut, qOut+kvOut))
				v := SliceAxis(all, 1, AxisRange(qOut+kvOut, qOut+2*kvOut))
				h := Mul(q, Concatenate([]*Node{k, v}, 1))
				x = Add(x, mm(Tanh(h), o))
				gu2 := mm(x, gu)
				return Add(x, mm(Mul(Sigmoid(SliceAxis(gu2, 1, AxisRange(0, ff))), SliceAxis(gu2, 1, AxisRange(ff, 2*ff))), dn))
			}
			var sepW, fusedW []*tensors.Tensor
			for range layers {
				sepW = append(sepW, randomTensor(b, dt, d, qOut), randomTensor(b, dt, d, kvOut), randomTensor(b, dt, d, kvOut),
					randomTensor(b, dt, qOut, d), randomTensor(b, dt, d, ff), randomTensor(b, dt, d, ff), randomTensor(b, dt, ff, d))
				fusedW = append(fusedW, randomTensor(b, dt, d, qOut+2*kvOut), randomTensor(b, dt, qOut, d),
					randomTensor(b, dt, d, 2*ff), randomTensor(b, dt, ff, d))
			}
			sep, err := NewExec(backend, func(in []*Node) *Node {
				x := in[0]
				for l := range layers {
					w := in[1+7*l:]
					x = layer(x, w[0], w[1], w[2], w[3], w[4], w[5], w[6])
				}
				return x
			})
			if err != nil {
				b.Fatal(err)
			}
			defer sep.Finalize()
			fused, err := NewExec(backend, func(in []*Node) *Node {
				x := in[0]
				for l := range layers {
					w := in[1+4*l:]
					x = fusedLayer(x, w[0], w[1], w[2], w[3])
				}
				return x
			})
			if err != nil {
				b.Fatal(err)
			}
			defer fused.Finalize()
			call := func(e *Exec, w []*tensors.Tensor) time.Duration {
				args := append([]any{x}, toAny(w)...)
				begin := time.Now()
				out, err := e.Call(args...)
				if err != nil {
					b.Fatal(err)
				}
				out[0].FinalizeAll()
				return time.Since(begin)
			}
			call(sep, sepW)
			call(fused, fusedW)
			var tSep, tFused time.Duration
			for b.Loop() {
				tSep += call(sep, sepW)
				tFused += call(fused, fusedW)
			}
			n := float64(b.N)
			b.ReportMetric(tSep.Seconds()*1e3/n, "ms/separate")
			b.ReportMetric(tFused.Seconds()*1e3/n, "ms/fused")
			b.ReportMetric(tSep.Seconds()/tFused.Seconds(), "separate/fused")
		})
	}
}

func toAny(ts []*tensors.Tensor) []any {
	out := make([]any, len(ts))
	for i, t := range ts {
		out[i] = t
	}
	return out
}
