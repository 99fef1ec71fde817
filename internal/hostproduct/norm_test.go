package hostproduct

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/shapes"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // the graph DSL reads best unqualified
	"github.com/gomlx/gomlx/core/tensors"
)

// normDefinition is NormFunction's body: weight · (x · rsqrt(mean(x²) + eps)), the statistics in
// float32, the normalized x rounded to x's dtype. Its scalars are constants of their own
// (TestGoMLXScalarCacheCrossesFunctions).
func normDefinition(x, weight *Node, eps float64) *Node {
	x32 := ConvertDType(x, dtypes.Float32)
	width := float32(x.Shape().Dimensions[x.Rank()-1])
	variance := Mul(ReduceAndKeep(Square(x32), ReduceSum, -1), Const(x.Graph(), 1/width))
	normed := ConvertDType(Mul(x32, Rsqrt(Add(variance, Const(x.Graph(), float32(eps))))), x.DType())
	for weight.Rank() < x.Rank() {
		weight = InsertAxes(weight, 0)
	}
	return Mul(weight, normed)
}

// ropeDefinition is RopeFunction's body: x · cos + swap(x) · sin, the tables broadcast over the
// heads.
func ropeDefinition(x, cos, sin *Node) *Node {
	dims := x.Shape().Dimensions
	halves := Reshape(x, append(append([]int{}, dims[:len(dims)-1]...), 2, dims[len(dims)-1]/2)...)
	swapped := Reshape(Reverse(halves, x.Rank()-1), dims...)
	cos, sin = BroadcastToDims(cos, dims...), BroadcastToDims(sin, dims...)
	return Add(Mul(x, cos), Mul(swapped, sin))
}

// TestNormAndRopeMatchTheBackend runs products by panels, then a residual connection and the
// norm after it, the norm of the result's heads, RoPE on them and a product of the norm's
// result, as calls of norm and rope functions on the wrapped backend, and the same with the
// definitions inline on the backend itself: one row, three and enough to be shared out in
// chunks, float32 and bfloat16, values spread far from 1 and near ε. The calls must run in Go and the steps between
// the products must leave no piece in float32.
func TestNormAndRopeMatchTheBackend(t *testing.T) {
	const in, count, width = 24, 4, 16 // the products' outputs: [rows, 64]
	const heads, hd, eps = 4, 16, 1e-6
	for _, tc := range []struct {
		name  string
		dtype dtypes.DType
		rows  int
		scale float32 // of x: 30 makes mean(x²) large, 1e-4 about ε (which then matters)
		tol   float64
	}{
		{"f32/1row", dtypes.Float32, 1, 30, 1e-6},
		{"f32/3rows", dtypes.Float32, 3, 30, 1e-6},
		{"f32/small", dtypes.Float32, 3, 1e-4, 1e-6},
		{"bf16/1row", dtypes.BFloat16, 1, 30, 1e-2},
		{"bf16/3rows", dtypes.BFloat16, 3, 30, 1e-2},
		{"bf16/small", dtypes.BFloat16, 3, 1e-4, 1e-2},
		{"f32/shared", dtypes.Float32, 600, 30, 1e-6}, // 38,400 values a call: three chunks
		{"bf16/shared", dtypes.BFloat16, 600, 30, 1e-2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inner, wrapped := newBackends(t, 1024)
			graph := func(host bool) func(ins []*Node) []*Node {
				return func(ins []*Node) []*Node {
					x, wa, wb, wd, weight, hweight, cos, sin := ins[0], ins[1], ins[2], ins[3], ins[4], ins[5], ins[6], ins[7]
					rows := x.Shape().Dimensions[0]
					prod := func(x, w *Node) *Node {
						y := DotGeneral(x, []int{1}, nil, w, []int{1}, nil)
						d := y.Shape().Dimensions
						return Reshape(y, rows, d[1]*d[2])
					}
					a, b := prod(x, wa), prod(x, wb)
					var h, y, heady, rotated *Node
					if host {
						g := x.Graph()
						residual := NewFunction(g, NormName(eps)+"#0", func(g *Graph) []*Node {
							pa, pb := Parameter(g, "a", a.Shape()), Parameter(g, "b", b.Shape())
							pw := Parameter(g, "weight", weight.Shape())
							sum := Add(pa, pb)
							return []*Node{sum, normDefinition(sum, pw, eps)}
						}).Call(a, b, weight)
						h, y = residual[0], residual[1]
						headx := Reshape(h, rows, heads, hd)
						heady = NewFunction(g, NormName(eps)+"#1", func(g *Graph) []*Node {
							return []*Node{normDefinition(Parameter(g, "x", headx.Shape()), Parameter(g, "w", hweight.Shape()), eps)}
						}).Call(headx, hweight)[0]
						rotated = NewFunction(g, RopeFunction+"#2", func(g *Graph) []*Node {
							return []*Node{ropeDefinition(Parameter(g, "x", heady.Shape()), Parameter(g, "cos", cos.Shape()), Parameter(g, "sin", sin.Shape()))}
						}).Call(heady, cos, sin)[0]
					} else {
						h = Add(a, b)
						y = normDefinition(h, weight, eps)
						heady = normDefinition(Reshape(h, rows, heads, hd), hweight, eps)
						rotated = ropeDefinition(heady, cos, sin)
					}
					out := []*Node{h, DotGeneral(y, []int{1}, nil, wd, []int{1}, nil), heady, rotated} // no view returned: no piece
					for i := range out {
						out[i] = ConvertDType(out[i], dtypes.Float32)
					}
					return out
				}
			}
			run := func(b compute.Backend, host bool) [][]float32 {
				exec, err := NewExec(b, graph(host))
				if err != nil {
					t.Fatal(err)
				}
				defer exec.Finalize()
				x := pattern(tc.rows*in, 1)
				for i := range x {
					x[i] *= tc.scale
				}
				weight := pattern(count*width, 5)
				hweight := pattern(hd, 6)
				angles := pattern(tc.rows*hd/2, 7)
				cos, sin := make([]float32, tc.rows*hd), make([]float32, tc.rows*hd)
				for r := range tc.rows {
					for i := range hd / 2 {
						c, s := float32(math.Cos(3*float64(angles[r*hd/2+i]))), float32(math.Sin(3*float64(angles[r*hd/2+i])))
						cos[r*hd+i], cos[r*hd+hd/2+i] = c, c
						sin[r*hd+i], sin[r*hd+hd/2+i] = -s, s
					}
				}
				out, err := exec.Call(asDType(x, tc.dtype, tc.rows, in),
					asDType(pattern(count*in*width, 2), tc.dtype, count, in, width),
					asDType(pattern(count*in*width, 3), tc.dtype, count, in, width),
					asDType(pattern(count*width*width, 4), tc.dtype, 1, count*width, width),
					asDType(weight, tc.dtype, count*width), asDType(hweight, tc.dtype, hd),
					asDType(cos, tc.dtype, tc.rows, 1, hd), asDType(sin, tc.dtype, tc.rows, 1, hd))
				if err != nil {
					t.Fatal(err)
				}
				all := make([][]float32, len(out))
				for i, o := range out {
					all[i] = flat32(t, o)
				}
				return all
			}
			want := run(inner, false)
			got := run(wrapped, true)
			if n, r := wrapped.NormsRun(), wrapped.RopesRun(); n != 2 || r != 1 {
				t.Errorf("%d norm and %d rope calls ran in Go, want 2 and 1", n, r)
			}
			if tc.dtype == dtypes.Float32 {
				if n := wrapped.piecesRun.Load(); n != 0 {
					t.Errorf("%d pieces ran, want none", n)
				}
			}
			for k, name := range []string{"sum", "product of the norm", "heads' norm", "rotated"} {
				scale := 0.0
				for _, w := range want[k] {
					scale = max(scale, math.Abs(float64(w)))
				}
				for i := range want[k] {
					if d := math.Abs(float64(want[k][i] - got[k][i])); d > tc.tol*scale {
						t.Fatalf("%s: value %d = %v, the backend's %v", name, i, got[k][i], want[k][i])
					}
				}
			}
		})
	}
}

// TestNormRefusesOtherForms builds calls of norm and rope functions whose operands or names the
// forms do not allow: the graph must fail to build, naming the function.
func TestNormRefusesOtherForms(t *testing.T) {
	for _, tc := range []struct {
		name    string
		fn      string
		args    []shapes.Shape
		results int
	}{
		{"no eps", NormFunction + "#0", []shapes.Shape{shapes.Make(dtypes.Float32, 2, 8), shapes.Make(dtypes.Float32, 8)}, 1},
		{"bad eps", NormFunction + " eps=-1#0", []shapes.Shape{shapes.Make(dtypes.Float32, 2, 8), shapes.Make(dtypes.Float32, 8)}, 1},
		{"weight's width", NormName(1e-6), []shapes.Shape{shapes.Make(dtypes.Float32, 2, 8), shapes.Make(dtypes.Float32, 4)}, 1},
		{"weight's dtype", NormName(1e-6), []shapes.Shape{shapes.Make(dtypes.BFloat16, 2, 8), shapes.Make(dtypes.Float32, 8)}, 1},
		{"float16", NormName(1e-6), []shapes.Shape{shapes.Make(dtypes.Float16, 2, 8), shapes.Make(dtypes.Float16, 8)}, 1},
		{"residual's shapes", NormName(1e-6), []shapes.Shape{shapes.Make(dtypes.Float32, 2, 8), shapes.Make(dtypes.Float32, 1, 8), shapes.Make(dtypes.Float32, 8)}, 2},
		{"residual's results", NormName(1e-6), []shapes.Shape{shapes.Make(dtypes.Float32, 2, 8), shapes.Make(dtypes.Float32, 2, 8), shapes.Make(dtypes.Float32, 8)}, 1},
		{"rope's tables", RopeFunction, []shapes.Shape{shapes.Make(dtypes.Float32, 2, 4, 8), shapes.Make(dtypes.Float32, 2, 4, 8), shapes.Make(dtypes.Float32, 2, 4, 8)}, 1},
		{"rope's odd width", RopeFunction, []shapes.Shape{shapes.Make(dtypes.Float32, 2, 4, 7), shapes.Make(dtypes.Float32, 2, 1, 7), shapes.Make(dtypes.Float32, 2, 1, 7)}, 1},
		{"rope's arguments", RopeFunction, []shapes.Shape{shapes.Make(dtypes.Float32, 2, 4, 8), shapes.Make(dtypes.Float32, 2, 1, 8)}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, wrapped := newBackends(t, 4)
			inputs := make([]*tensors.Tensor, len(tc.args))
			for i, s := range tc.args {
				inputs[i] = tensors.FromShape(s)
			}
			exec, err := NewExec(compute.Backend(wrapped), func(xs []*Node) *Node {
				args := make([]*Node, len(xs))
				for i, x := range xs {
					args[i] = Neg(x) // a value of the graph, not a parameter
				}
				fn := NewFunction(xs[0].Graph(), tc.fn, func(g *Graph) []*Node {
					outs := []*Node{}
					for i, a := range args {
						p := Parameter(g, fmt.Sprintf("p%d", i), a.Shape())
						if i == 0 {
							outs = append(outs, p)
						}
					}
					for len(outs) < tc.results {
						outs = append(outs, outs[0])
					}
					return outs
				})
				return fn.Call(args...)[0]
			})
			if err != nil {
				t.Fatal(err)
			}
			defer exec.Finalize()
			anyInputs := make([]any, len(inputs))
			for i, x := range inputs {
				anyInputs[i] = x
			}
			_, err = exec.Call(anyInputs...)
			want := NormFunction
			if strings.HasPrefix(tc.fn, RopeFunction) {
				want = RopeFunction
			}
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("error %v, want one naming %s", err, want)
			}
		})
	}
}
