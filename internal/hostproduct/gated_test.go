package hostproduct

import (
	"math"
	"strings"
	"testing"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/shapes"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // the graph DSL reads best unqualified
	"github.com/gomlx/gomlx/core/tensors"
)

// gatedDefinition is GatedFunction's body: gate · σ(gate) · up.
func gatedDefinition(gate, up *Node) *Node { return Mul(Mul(gate, Sigmoid(gate)), up) }

// TestGatedMatchesTheBackend runs products by panels, a call of a gated function on their
// outputs and a product of its result on the wrapped backend, and the same with the definition
// inline on the backend itself: one row (the vector kernel and its scalar tail), three, and
// enough values to be shared out in chunks, float32 and bfloat16, the gate spread to ±120 (σ's
// clamped ends). The call must run in Go and leave no piece between the products.
func TestGatedMatchesTheBackend(t *testing.T) {
	const in, count, width = 24, 3, 16 // gate and up: [rows, 48] each
	for _, tc := range []struct {
		name  string
		dtype dtypes.DType
		rows  int
		tol   float64
	}{
		{"f32/1row", dtypes.Float32, 1, 2e-6},
		{"f32/3rows", dtypes.Float32, 3, 2e-6},
		{"f32/chunks", dtypes.Float32, 800, 2e-6}, // 38,400 values: three chunks
		{"bf16/1row", dtypes.BFloat16, 1, 2e-2},   // and the conversion at the end in Go
		{"bf16/chunks", dtypes.BFloat16, 800, 2e-2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inner, wrapped := newBackends(t, 1024)
			graph := func(host bool) func(x, wg, wu, wd *Node) *Node {
				return func(x, wg, wu, wd *Node) *Node {
					rows := x.Shape().Dimensions[0]
					prod := func(x, w *Node) *Node {
						y := DotGeneral(x, []int{1}, nil, w, []int{1}, nil)
						d := y.Shape().Dimensions
						return Reshape(y, rows, d[1]*d[2])
					}
					gate := prod(x, wg)
					up := prod(x, wu)
					var h *Node
					if host {
						fn := NewFunction(x.Graph(), GatedFunction+"#0", func(g *Graph) []*Node {
							a := Parameter(g, "gate", gate.Shape())
							b := Parameter(g, "up", up.Shape())
							return []*Node{gatedDefinition(a, b)}
						})
						h = fn.Call(gate, up)[0]
					} else {
						h = gatedDefinition(gate, up)
					}
					return ConvertDType(Concatenate([]*Node{h, prod(h, wd)}, 1), dtypes.Float32)
				}
			}
			run := func(b compute.Backend, host bool) []float32 {
				exec, err := NewExec(b, graph(host))
				if err != nil {
					t.Fatal(err)
				}
				defer exec.Finalize()
				x := pattern(tc.rows*in, 1)
				for i := range x {
					x[i] *= 40 // products up to about ±120
				}
				out, err := exec.Call(asDType(x, tc.dtype, tc.rows, in),
					asDType(pattern(count*in*width, 2), tc.dtype, count, in, width),
					asDType(pattern(count*in*width, 3), tc.dtype, count, in, width),
					asDType(pattern(count*width*width, 4), tc.dtype, 1, count*width, width))
				if err != nil {
					t.Fatal(err)
				}
				return flat32(t, out[0])
			}
			want := run(inner, false)
			got := run(wrapped, true)
			if n := wrapped.GatedRun(); n != 1 {
				t.Errorf("%d gated calls ran in Go, want 1", n)
			}
			if n := wrapped.piecesRun.Load(); n != 0 { // the join and bfloat16's conversion run in Go
				t.Errorf("%d pieces ran, want none", n)
			}
			converts := int64(0)
			if tc.dtype != dtypes.Float32 {
				converts = 1
			}
			if n := wrapped.ConvertsRun(); n != converts {
				t.Errorf("%d conversions ran in Go, want %d", n, converts)
			}
			scale := 0.0
			for _, w := range want {
				scale = max(scale, math.Abs(float64(w)))
			}
			for i := range want {
				if d := math.Abs(float64(want[i] - got[i])); d > tc.tol*(1+scale) {
					t.Fatalf("value %d = %v, the backend's %v", i, got[i], want[i])
				}
			}
		})
	}
}

// TestGatedRefusesOtherShapes builds calls of a gated function whose operands the form does not
// allow: the graph must fail to build, naming the function.
func TestGatedRefusesOtherShapes(t *testing.T) {
	for _, tc := range []struct {
		name    string
		gate    []int
		up      []int
		dtype   dtypes.DType
		results int
	}{
		{"shapes differ", []int{2, 8}, []int{2, 4}, dtypes.Float32, 1},
		{"float16", []int{2, 8}, []int{2, 8}, dtypes.Float16, 1},
		{"two results", []int{2, 8}, []int{2, 8}, dtypes.Float32, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, wrapped := newBackends(t, 4)
			exec, err := NewExec(compute.Backend(wrapped), func(a, b *Node) *Node {
				fn := NewFunction(a.Graph(), GatedFunction+"#0", func(g *Graph) []*Node {
					pa := Parameter(g, "gate", a.Shape())
					pb := Parameter(g, "up", b.Shape())
					outs := []*Node{Add(ReduceAllSum(pa), ReduceAllSum(pb))}
					for len(outs) < tc.results {
						outs = append(outs, outs[0])
					}
					return outs
				})
				return fn.Call(Tanh(a), Tanh(b))[0]
			})
			if err != nil {
				t.Fatal(err)
			}
			defer exec.Finalize()
			_, err = exec.Call(tensors.FromShape(shapes.Make(tc.dtype, tc.gate...)), tensors.FromShape(shapes.Make(tc.dtype, tc.up...)))
			if err == nil || !strings.Contains(err.Error(), GatedFunction) {
				t.Fatalf("error %v, want one naming %s", err, GatedFunction)
			}
		})
	}
}

// TestGatedOnViews calls a gated function on views of products' outputs ([1, rows, n] of buffers
// [rows, count, width]) and reads its result in a piece: the result's buffer must have the
// result's shape, not the gate buffer's, which the call may otherwise reuse.
func TestGatedOnViews(t *testing.T) {
	const rows, in, count, width = 2, 24, 3, 16
	inner, wrapped := newBackends(t, 4)
	run := func(b compute.Backend, host bool) []float32 {
		exec, err := NewExec(b, func(x, wg, wu *Node) *Node {
			gate := Reshape(DotGeneral(x, []int{1}, nil, wg, []int{1}, nil), 1, rows, count*width)
			up := Reshape(DotGeneral(x, []int{1}, nil, wu, []int{1}, nil), 1, rows, count*width)
			h := gatedDefinition(gate, up)
			if host {
				fn := NewFunction(x.Graph(), GatedFunction+"#0", func(g *Graph) []*Node {
					return []*Node{gatedDefinition(Parameter(g, "gate", gate.Shape()), Parameter(g, "up", up.Shape()))}
				})
				h = fn.Call(gate, up)[0]
			}
			return Tanh(h)
		})
		if err != nil {
			t.Fatal(err)
		}
		defer exec.Finalize()
		out, err := exec.Call(tensors.FromFlatDataAndDimensions(pattern(rows*in, 1), rows, in),
			tensors.FromFlatDataAndDimensions(pattern(count*in*width, 2), count, in, width),
			tensors.FromFlatDataAndDimensions(pattern(count*in*width, 3), count, in, width))
		if err != nil {
			t.Fatal(err)
		}
		return flat32(t, out[0])
	}
	want, got := run(inner, false), run(wrapped, true)
	if wrapped.GatedRun() != 1 {
		t.Errorf("%d gated calls ran in Go, want 1", wrapped.GatedRun())
	}
	for i := range want {
		if d := math.Abs(float64(want[i] - got[i])); d > 2e-6 {
			t.Fatalf("value %d = %v, the backend's %v", i, got[i], want[i])
		}
	}
}
