package octlm

import (
	"testing"
	"time"

	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/shapes"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // the graph DSL reads best unqualified
	"github.com/gomlx/gomlx/core/tensors"

	"github.com/octlm/octlm/xla"
)

// BenchmarkAttentionAtDepth is the reproduction for ONNX Runtime's slow decode at depth: one
// decode row's attention over a Qwen3-0.6B layer's cache at 4,096 positions (8 kv heads × 2
// query heads each × 128), scaled to 28 layers, whole and in parts: the cache written
// (ScatterND, a new buffer each), the attended slots sliced off (a copy each), the scores and
// the weighted values. With glibc's threshold for mapping large blocks fixed at 256 KiB, every
// 17 MB buffer was mapped and zero-filled afresh on each call: slicing alone took 325 ms and the
// whole 588–614 ms against 42 ms for a sum over the same cache (Intel Xeon, 2 threads).
func BenchmarkAttentionAtDepth(b *testing.B) {
	const kvH, group, hd, capacity, layers = 8, 2, 128, 4096 + 64, 28
	backend := onnxBackend(b)
	o := ops{layout: LayoutFor(xla.EngineONNX)}
	variants := map[string]func(q, k, kc, vc, start *Node) []*Node{
		"full": func(q, k, kc, vc, start *Node) []*Node {
			nk := writeOne(o, kc, k, start)
			nv := writeOne(o, vc, k, start)
			keys := SliceAxis(nk, 1, AxisRange(0, capacity-32))
			vals := SliceAxis(nv, 1, AxisRange(0, capacity-32))
			s := o.dotLastAxes(q, keys, 1)
			p := Softmax(s, -1)
			ctx := DotGeneral(p, []int{2}, []int{0}, vals, []int{1}, []int{0})
			return []*Node{ctx, nk, nv}
		},
		"noscatter": func(q, k, kc, vc, start *Node) []*Node {
			keys := SliceAxis(kc, 1, AxisRange(0, capacity-32))
			vals := SliceAxis(vc, 1, AxisRange(0, capacity-32))
			s := o.dotLastAxes(q, keys, 1)
			p := Softmax(s, -1)
			ctx := DotGeneral(p, []int{2}, []int{0}, vals, []int{1}, []int{0})
			return []*Node{ctx}
		},
		"noslice": func(q, k, kc, vc, start *Node) []*Node {
			s := o.dotLastAxes(q, kc, 1)
			p := Softmax(s, -1)
			ctx := DotGeneral(p, []int{2}, []int{0}, vc, []int{1}, []int{0})
			return []*Node{ctx}
		},
		"sliceonly": func(q, k, kc, vc, start *Node) []*Node {
			return []*Node{ReduceAllSum(SliceAxis(kc, 1, AxisRange(0, capacity-32))), ReduceAllSum(SliceAxis(vc, 1, AxisRange(0, capacity-32)))}
		},
		"sumonly": func(q, k, kc, vc, start *Node) []*Node {
			return []*Node{ReduceAllSum(kc), ReduceAllSum(vc)}
		},
		"dynslice": func(q, k, kc, vc, start *Node) []*Node {
			z := ScalarZero(q.Graph(), dtypes.Int32)
			keys := DynamicSlice(kc, []*Node{z, z, z}, []int{kvH, capacity - 32, hd})
			vals := DynamicSlice(vc, []*Node{z, z, z}, []int{kvH, capacity - 32, hd})
			s := o.dotLastAxes(q, keys, 1)
			p := Softmax(s, -1)
			ctx := DotGeneral(p, []int{2}, []int{0}, vals, []int{1}, []int{0})
			return []*Node{ctx}
		},
		"slicescores": func(q, k, kc, vc, start *Node) []*Node {
			return []*Node{o.dotLastAxes(q, SliceAxis(kc, 1, AxisRange(0, capacity-32)), 1)}
		},
		"slicectx": func(q, k, kc, vc, start *Node) []*Node {
			p := Ones(q.Graph(), shapes.Make(dtypes.Float32, kvH, group, capacity-32))
			return []*Node{DotGeneral(p, []int{2}, []int{0}, SliceAxis(vc, 1, AxisRange(0, capacity-32)), []int{1}, []int{0})}
		},
		"scoresonly": func(q, k, kc, vc, start *Node) []*Node {
			return []*Node{o.dotLastAxes(q, kc, 1)}
		},
		"ctxonly": func(q, k, kc, vc, start *Node) []*Node {
			p := Ones(q.Graph(), shapes.Make(dtypes.Float32, kvH, group, capacity))
			return []*Node{DotGeneral(p, []int{2}, []int{0}, vc, []int{1}, []int{0})}
		},
		"scatteronly": func(q, k, kc, vc, start *Node) []*Node {
			return []*Node{writeOne(o, kc, k, start), writeOne(o, vc, k, start)}
		},
	}
	kc := tensors.FromShape(shapes.Make(dtypes.Float32, kvH, capacity, hd))
	vc := tensors.FromShape(shapes.Make(dtypes.Float32, kvH, capacity, hd))
	q := randomTensor(b, dtypes.Float32, kvH, group, hd)
	k := randomTensor(b, dtypes.Float32, kvH, 1, hd)
	for name, fn := range variants {
		b.Run(name, func(b *testing.B) {
			exec, err := NewExec(backend, func(q, k, kc, vc, start *Node) []*Node { return fn(q, k, kc, vc, start) })
			if err != nil {
				b.Fatal(err)
			}
			defer exec.Finalize()
			run := func() {
				out, err := exec.Call(q, k, kc, vc, int32(4096))
				if err != nil {
					b.Fatal(err)
				}
				for _, t := range out {
					t.FinalizeAll()
				}
			}
			run()
			begin := time.Now()
			for b.Loop() {
				run()
			}
			b.ReportMetric(float64(time.Since(begin).Microseconds())/float64(b.N)*layers/1000, "ms/28layers")
		})
	}
}

// writeOne is ops.writeCache for one sequence: cache [heads, capacity, width], rows
// [heads, S, width], start a scalar.
func writeOne(o ops, cache, rows, start *Node) *Node {
	return Squeeze(o.writeCache(InsertAxes(cache, 0), InsertAxes(rows, 0), Reshape(start, 1)), 0)
}
