package octlm

import (
	"testing"
	"time"

	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/shapes"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // the graph DSL reads best unqualified
	"github.com/gomlx/gomlx/core/tensors"
)

// BenchmarkMiddleBroadcast is the reproduction behind Layout.SpreadTables: a 128-token prompt's
// queries [1, 128, 16, 128] multiplied 28 times by a RoPE table [1, 128, 1, 128] broadcast over
// the heads (a middle axis), by the same table made [1, 128, 16, 128] by BroadcastToDims, and by
// it repeated over the heads (ops.spread), alternated; milliseconds a product. compute v0.1.14's
// binary operations take their vector path only for one shape or a broadcast over leading or
// trailing axes; the first two go index by index (2026-12-06, 2-core Xeon: 0.64 and 0.66 against
// 0.09 ms).
//
//	GOEXPERIMENT=simd go test ./octlm -run '^$' -bench MiddleBroadcast -benchtime 20x
func BenchmarkMiddleBroadcast(b *testing.B) {
	const seq, heads, headDim, products = 128, 16, 128, 28
	cases := []struct {
		name  string
		table func(t *Node) *Node
	}{
		{"broadcast", func(t *Node) *Node { return t }},
		{"broadcast-to-dims", func(t *Node) *Node { return BroadcastToDims(t, 1, seq, heads, headDim) }},
		{"spread", func(t *Node) *Node { return ops{layout: Layout{SpreadTables: true}}.spread(t, 2, heads) }},
	}
	execs := make([]*Exec, len(cases))
	for i, c := range cases {
		execs[i] = MustNewExec(goBackend(b), func(x *Node) *Node {
			table := c.table(Iota(x.Graph(), shapes.Make(dtypes.Float32, 1, seq, 1, headDim), 3))
			for range products {
				x = Mul(x, table)
			}
			return x
		})
	}
	took := make([]time.Duration, len(cases))
	for b.Loop() {
		for i, exec := range execs {
			x := tensors.FromShape(shapes.Make(dtypes.Float32, 1, seq, heads, headDim))
			begin := time.Now()
			out := exec.MustCall(x)
			took[i] += time.Since(begin)
			out[0].FinalizeAll()
		}
	}
	for i, c := range cases {
		b.ReportMetric(took[i].Seconds()*1e3/float64(b.N*products), "ms/"+c.name)
	}
}
