package hostproduct

import (
	"math"
	"testing"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // the graph DSL reads best unqualified
	"github.com/gomlx/gomlx/core/tensors"
)

// TestJoinsAndViews runs graphs whose products' outputs are reshaped and put side by side on
// the wrapped backend and on the backend itself: the results must match, the Concatenate run in
// Go (in place where each operand is a product's output read by nothing else and a contiguous
// part of the result), and a Reshape between two products must leave no piece between them.
func TestJoinsAndViews(t *testing.T) {
	const in, width = 32, 16
	// products are x's products by w1 [2, in, width], w2 and w3 [1, in, width], each reshaped
	// to [rows, n].
	products := func(x, w1, w2, w3 *Node) []*Node {
		rows := x.Shape().Dimensions[0]
		var ys []*Node
		for _, w := range []*Node{w1, w2, w3} {
			y := DotGeneral(x, []int{1}, nil, w, []int{1}, nil)
			d := y.Shape().Dimensions
			ys = append(ys, Reshape(y, rows, d[1]*d[2]))
		}
		return ys
	}
	for _, tc := range []struct {
		name    string
		dtype   dtypes.DType
		rows    int
		joins   int64 // Concatenate operations run in Go
		inPlace int64 // of them, written in place by their products
		pieces  int64 // compiled pieces run; -1: any
		w2Width bool  // w2 multiplies rows of width values, not in
		graph   func(x, w1, w2, w3 *Node) []*Node
	}{
		{"one-row", dtypes.Float32, 1, 1, 1, 1, false, func(x, w1, w2, w3 *Node) []*Node {
			c := Concatenate(products(x, w1, w2, w3), 1)
			return []*Node{Tanh(c), Reshape(c, 4*width)} // a view returned
		}},
		{"one-row-bf16", dtypes.BFloat16, 1, 1, 1, 1, false, func(x, w1, w2, w3 *Node) []*Node {
			return []*Node{Tanh(Concatenate(products(x, w1, w2, w3), 1))}
		}},
		{"three-rows", dtypes.Float32, 3, 1, 1, 1, false, func(x, w1, w2, w3 *Node) []*Node {
			return []*Node{Tanh(Concatenate(products(x, w1, w2, w3), 1))}
		}},
		{"three-rows-bf16", dtypes.BFloat16, 3, 1, 1, 1, false, func(x, w1, w2, w3 *Node) []*Node {
			return []*Node{Tanh(Concatenate(products(x, w1, w2, w3), 1))}
		}},
		{"first-axis", dtypes.Float32, 1, 1, 1, 1, false, func(x, w1, w2, w3 *Node) []*Node {
			ys := products(x, w1, w2, w3)
			return []*Node{Tanh(Concatenate([]*Node{ys[1], ys[2]}, 0))} // [2, width]
		}},
		{"first-axis-three-rows", dtypes.Float32, 3, 1, 1, 1, false, func(x, w1, w2, w3 *Node) []*Node {
			ys := products(x, w1, w2, w3)
			return []*Node{Tanh(Concatenate([]*Node{ys[1], ys[2]}, 0))} // [6, width]
		}},
		{"output-read-twice", dtypes.Float32, 1, 1, 0, 1, false, func(x, w1, w2, w3 *Node) []*Node {
			ys := products(x, w1, w2, w3)
			c := Concatenate(ys, 1)
			return []*Node{Add(SliceAxis(c, 1, AxisRange(0, width)), ys[1])}
		}},
		{"joined-output-returned", dtypes.Float32, 1, 1, 1, 0, false, func(x, w1, w2, w3 *Node) []*Node {
			return []*Node{Concatenate(products(x, w1, w2, w3), 1)}
		}},
		{"view-between-products", dtypes.Float32, 1, 0, 0, 0, true, func(x, w1, w2, w3 *Node) []*Node {
			y := DotGeneral(x, []int{1}, nil, w1, []int{1}, nil)                    // [1, 2, width]
			z := DotGeneral(Reshape(y, 2, width), []int{1}, nil, w2, []int{1}, nil) // [2, 1, width]
			return []*Node{z}
		}},
		{"in-a-piece", dtypes.Float32, 1, 0, 0, -1, false, func(x, w1, w2, w3 *Node) []*Node {
			return []*Node{Concatenate([]*Node{Tanh(x), Exp(x)}, 1)}
		}},
		{"parameter-view-returned", dtypes.Float32, 2, 0, 0, -1, false, func(x, w1, w2, w3 *Node) []*Node {
			return []*Node{Reshape(x, 2*in), Tanh(x)}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inner, wrapped := newBackends(t, 4)
			run := func(b compute.Backend) []*tensors.Tensor {
				exec, err := NewExec(b, func(x, w1, w2, w3 *Node) []*Node {
					outs := tc.graph(x, w1, w2, w3)
					for i := range outs {
						outs[i] = ConvertDType(outs[i], dtypes.Float32)
					}
					return outs
				})
				if err != nil {
					t.Fatal(err)
				}
				defer exec.Finalize()
				w2in := in
				if tc.w2Width {
					w2in = width
				}
				out, err := exec.Call(asDType(pattern(tc.rows*in, 1), tc.dtype, tc.rows, in),
					asDType(pattern(2*in*width, 2), tc.dtype, 2, in, width),
					asDType(pattern(w2in*width, 3), tc.dtype, 1, w2in, width),
					asDType(pattern(in*width, 4), tc.dtype, 1, in, width))
				if err != nil {
					t.Fatal(err)
				}
				return out
			}
			want := run(inner)
			got := run(wrapped)
			tol := 1e-5
			if tc.dtype == dtypes.BFloat16 {
				tol = 2e-2
			}
			for i := range want {
				if !want[i].Shape().Equal(got[i].Shape()) {
					t.Fatalf("output %d is %s, want %s", i, got[i].Shape(), want[i].Shape())
				}
				w, g := flat32(t, want[i]), flat32(t, got[i])
				for j := range w {
					if d := math.Abs(float64(w[j] - g[j])); d > tol*(1+math.Abs(float64(w[j]))) {
						t.Fatalf("output %d[%d] = %v, the backend's %v", i, j, g[j], w[j])
					}
				}
			}
			if n := wrapped.JoinsRun(); n != tc.joins {
				t.Errorf("%d Concatenate run in Go, want %d", n, tc.joins)
			}
			if n := wrapped.joinedInPlace.Load(); n != tc.inPlace {
				t.Errorf("%d joins written in place, want %d", n, tc.inPlace)
			}
			if n := wrapped.piecesRun.Load(); tc.pieces >= 0 && n != tc.pieces {
				t.Errorf("%d pieces run, want %d", n, tc.pieces)
			}
		})
	}
}
