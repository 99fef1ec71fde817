package hostproduct

import (
	"math"
	"testing"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/dtypes/bfloat16"
	"github.com/gomlx/compute/dtypes/float16"
	"github.com/gomlx/compute/gobackend"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // the graph DSL reads best unqualified
	"github.com/gomlx/gomlx/core/tensors"
)

// newBackends returns the pure-Go backend and the same wrapped, running products of up to
// maxRows rows in Go.
func newBackends(t testing.TB, maxRows int) (compute.Backend, *Backend) {
	t.Helper()
	inner, err := gobackend.New("")
	if err != nil {
		t.Fatal(err)
	}
	wrapped, err := Wrap(inner, Options{MaxRows: maxRows})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(wrapped.Finalize) // its crew too
	return inner, wrapped
}

// pattern fills n values with a deterministic spread in [−1, 1).
func pattern(n, seed int) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = float32((i*7919+seed*104729)%2003)/1001.5 - 1
	}
	return out
}

// twoProducts is a graph with two products by panels and operations around them: the first
// product's input is computed, its output feeds the second, and the graph also returns a
// parameter as it is and a value computed before the first product.
func twoProducts(x, w1, w2 *Node) []*Node {
	rows := x.Shape().Dimensions[0]
	h := Tanh(x)
	y := DotGeneral(h, []int{1}, nil, w1, []int{1}, nil) // [rows, c1, 64]
	d := w1.Shape().Dimensions
	y = Reshape(y, rows, d[0]*d[2])
	g := Mul(y, Sigmoid(y))
	z := DotGeneral(g, []int{1}, nil, w2, []int{1}, nil)
	d2 := w2.Shape().Dimensions
	z = Add(Reshape(z, rows, d2[0]*d2[2]), ReduceAndKeep(h, ReduceSum, -1))
	return []*Node{z, x, h}
}

// TestProductsMatchTheBackend runs twoProducts on the wrapped backend, where the products run in
// Go, and on the backend itself, for float32 and bfloat16, one to six rows (MaxRows 6 here), and a product of
// more rows than MaxRows (left to the backend).
func TestProductsMatchTheBackend(t *testing.T) {
	const in, c1, c2, width = 96, 3, 2, 64
	for _, tc := range []struct {
		name  string
		dtype dtypes.DType
		rows  int
		tol   float64
		max   int // Options.MaxRows; 0 for 6
	}{
		{"f32/1row", dtypes.Float32, 1, 1e-5, 0},
		{"f32/3rows", dtypes.Float32, 3, 1e-5, 0},
		// 5e-5 at five rows: Go sums each of the second product's 192 terms in order, compute in
		// its own blocks (a build without GOEXPERIMENT=simd differed by 2.5e-5 there).
		{"f32/5rows", dtypes.Float32, 5, 5e-5, 0},
		{"f32/past-MaxRows", dtypes.Float32, 7, 1e-5, 0},
		{"bf16/1row", dtypes.BFloat16, 1, 2e-2, 0},
		{"bf16/2rows", dtypes.BFloat16, 2, 2e-2, 0},
		{"bf16/6rows", dtypes.BFloat16, 6, 2e-2, 0},
		// 19 rows: two groups of eight (the eight-row kernels, fewer than widenRows) and three
		// alone.
		{"f32/19rows", dtypes.Float32, 19, 5e-5, 20},
		{"bf16/19rows", dtypes.BFloat16, 19, 2e-2, 20},
		// 35 rows: eight groups of four and three alone; in bfloat16 each panel widened once
		// (widenRows).
		{"f32/35rows", dtypes.Float32, 35, 5e-5, 40},
		{"bf16/35rows", dtypes.BFloat16, 35, 2e-2, 40},
	} {
		t.Run(tc.name, func(t *testing.T) {
			maxRows := 6
			if tc.max > 0 {
				maxRows = tc.max
			}
			inner, wrapped := newBackends(t, maxRows)
			args := func() []any {
				x := asDType(pattern(tc.rows*in, 1), tc.dtype, tc.rows, in)
				w1 := asDType(pattern(c1*in*width, 2), tc.dtype, c1, in, width)
				w2 := asDType(pattern(c2*c1*width*width, 3), tc.dtype, c2, c1*width, width)
				return []any{x, w1, w2}
			}
			run := func(b compute.Backend) []*tensors.Tensor {
				exec, err := NewExec(b, func(x, w1, w2 *Node) []*Node {
					outs := twoProducts(x, w1, w2) // the weights must be the graph's parameters
					for i := range outs {
						outs[i] = ConvertDType(outs[i], dtypes.Float32)
					}
					return outs
				})
				if err != nil {
					t.Fatal(err)
				}
				defer exec.Finalize()
				out, err := exec.Call(args()...)
				if err != nil {
					t.Fatal(err)
				}
				return out
			}
			want := run(inner)
			before := wrapped.ProductsRun()
			got := run(wrapped)
			inGo := 0
			if tc.rows <= maxRows {
				inGo = 2
			}
			if n := wrapped.ProductsRun() - before; n != int64(inGo) {
				t.Errorf("%d products ran in Go, want %d", n, inGo)
			}
			for i := range want {
				w, g := flat32(t, want[i]), flat32(t, got[i])
				if len(w) != len(g) {
					t.Fatalf("output %d: %d values, want %d", i, len(g), len(w))
				}
				for j := range w {
					if d := math.Abs(float64(w[j] - g[j])); d > tc.tol*(1+math.Abs(float64(w[j]))) {
						t.Fatalf("output %d[%d] = %v, the backend's %v", i, j, g[j], w[j])
					}
				}
			}
		})
	}
}

// asDType is a tensor of dims holding values in dtype (float32 or bfloat16).
func asDType(values []float32, dtype dtypes.DType, dims ...int) *tensors.Tensor {
	switch dtype {
	case dtypes.Float32:
		return tensors.FromFlatDataAndDimensions(values, dims...)
	case dtypes.Float16:
		return tensors.FromFlatDataAndDimensions(float16.FromFloat32s(values...), dims...)
	}
	half := make([]bfloat16.BFloat16, len(values))
	for i, v := range values {
		half[i] = bfloat16.FromFloat32(v)
	}
	return tensors.FromFlatDataAndDimensions(half, dims...)
}

// flat32 is a tensor's values as float32.
func flat32(t testing.TB, x *tensors.Tensor) []float32 {
	t.Helper()
	var out []float32
	tensors.MustConstFlatData(x, func(f []float32) { out = append(out, f...) })
	return out
}

// TestWrapRefuses checks Wrap's errors.
func TestWrapRefuses(t *testing.T) {
	if _, err := Wrap(nil, Options{}); err == nil {
		t.Fatal("Wrap(nil) gave no error")
	}
	inner, err := gobackend.New("")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Wrap(inner, Options{MaxRows: -1}); err == nil {
		t.Fatal("Wrap with MaxRows −1 gave no error")
	}
}

// TestGraphsAroundProducts runs graphs that stress the cutting, on the wrapped backend and on the
// backend itself: a closure (Sort's comparator) before a product, after which nothing is cut; a
// closure after one; a product whose rows are a parameter; and a donated input read on both
// sides of a product.
func TestGraphsAroundProducts(t *testing.T) {
	const rows, in, count, width = 2, 48, 2, 64
	product := func(x, w *Node) *Node {
		return Reshape(DotGeneral(x, []int{1}, nil, w, []int{1}, nil), rows, count*width)
	}
	for _, tc := range []struct {
		name   string
		inGo   int64 // products run in Go
		donate bool
		graph  func(x, w *Node) *Node
	}{
		{"sort-then-product", 0, false, func(x, w *Node) *Node { return product(Sort(x, -1, true), w) }},
		{"product-then-sort", 1, false, func(x, w *Node) *Node { return Sort(product(x, w), -1, true) }},
		{"rows-are-a-parameter", 1, false, func(x, w *Node) *Node { return product(x, w) }},
		{"donated-rows-read-after", 1, true, func(x, w *Node) *Node {
			y := product(Tanh(x), w)
			return Add(y, ReduceAndKeep(Mul(x, x), ReduceSum, -1))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inner, wrapped := newBackends(t, 3)
			run := func(b compute.Backend) []float32 {
				exec, err := NewExec(b, tc.graph)
				if err != nil {
					t.Fatal(err)
				}
				defer exec.Finalize()
				var x any = tensors.FromFlatDataAndDimensions(pattern(rows*in, 4), rows, in)
				if tc.donate {
					if x, err = DonateTensorBuffer(x.(*tensors.Tensor), b, 0); err != nil {
						t.Fatal(err)
					}
				}
				out, err := exec.Call(x, tensors.FromFlatDataAndDimensions(pattern(count*in*width, 5), count, in, width))
				if err != nil {
					t.Fatal(err)
				}
				return flat32(t, out[0])
			}
			want := run(inner)
			got := run(wrapped)
			if n := wrapped.ProductsRun(); n != tc.inGo {
				t.Errorf("%d products ran in Go, want %d", n, tc.inGo)
			}
			for i := range want {
				if d := math.Abs(float64(want[i] - got[i])); d > 1e-5*(1+math.Abs(float64(want[i]))) {
					t.Fatalf("value %d = %v, the backend's %v", i, got[i], want[i])
				}
			}
		})
	}
}

// TestFusedAttentionPassesThrough runs compute's fused attention (its options are mapped by hand)
// and a product of its output on the wrapped backend and on the backend itself.
func TestFusedAttentionPassesThrough(t *testing.T) {
	const heads, seq, hd, count, width = 2, 3, 16, 1, 64
	inner, wrapped := newBackends(t, heads*seq)
	graph := func(q, k, v, w *Node) *Node {
		out, _ := BackendFusedScaledDotProductAttention(q, k, v, compute.AttentionAxesLayoutBHSD,
			&compute.ScaledDotProductAttentionConfig{Scale: 0.25, Causal: true})
		rows := Reshape(out, heads*seq, hd)
		return Reshape(DotGeneral(rows, []int{1}, nil, w, []int{1}, nil), heads*seq, count*width)
	}
	run := func(b compute.Backend) []float32 {
		exec, err := NewExec(b, graph)
		if err != nil {
			t.Fatal(err)
		}
		defer exec.Finalize()
		qkv := func(seed int) *tensors.Tensor {
			return tensors.FromFlatDataAndDimensions(pattern(heads*seq*hd, seed), 1, heads, seq, hd)
		}
		out, err := exec.Call(qkv(6), qkv(7), qkv(8), tensors.FromFlatDataAndDimensions(pattern(count*hd*width, 9), count, hd, width))
		if err != nil {
			t.Fatal(err)
		}
		return flat32(t, out[0])
	}
	want, got := run(inner), run(wrapped)
	if wrapped.ProductsRun() != 1 {
		t.Errorf("%d products ran in Go, want 1", wrapped.ProductsRun())
	}
	for i := range want {
		if d := math.Abs(float64(want[i] - got[i])); d > 1e-5*(1+math.Abs(float64(want[i]))) {
			t.Fatalf("value %d = %v, the backend's %v", i, got[i], want[i])
		}
	}
}

// TestOneRunOfSeveralProducts runs three bfloat16 products that read no result of each other, so
// one run of products, two on the same rows (widened to float32 once) and one on other rows,
// twice on one executable (the second run borrows the first's scratch), against the backend.
func TestOneRunOfSeveralProducts(t *testing.T) {
	const in, count, width, rows = 64, 2, 64, 2
	inner, wrapped := newBackends(t, rows)
	graph := func(x, w1, w2, w3 *Node) []*Node {
		x2 := Neg(x)
		outs := hostProductsOf([]*Node{x, x, x2}, []*Node{w1, w2, w3})
		for i := range outs {
			outs[i] = ConvertDType(outs[i], dtypes.Float32)
		}
		return outs
	}
	args := func() []any { // a tensor per backend and call
		a := []any{asDType(pattern(rows*in, 7), dtypes.BFloat16, rows, in)}
		for seed := range 3 {
			a = append(a, asDType(pattern(count*in*width, 8+seed), dtypes.BFloat16, count, in, width))
		}
		return a
	}
	want, err := MustNewExec(inner, graph).Call(args()...)
	if err != nil {
		t.Fatal(err)
	}
	exec := MustNewExec(wrapped, graph)
	for call := range 2 {
		before, spentBefore := wrapped.ProductsRun(), wrapped.Times()
		got, err := exec.Call(args()...)
		if err != nil {
			t.Fatal(err)
		}
		if n := wrapped.ProductsRun() - before; n != 3 {
			t.Errorf("call %d: %d products ran in Go, want 3", call, n)
		}
		// The products read each bfloat16 weight once; Neg and the conversions are pieces.
		spent := wrapped.Times().Sub(spentBefore)
		if spent.ProductWeightBytes != 3*count*in*width*2 || spent.Products <= 0 || spent.Pieces <= 0 || spent.Attention != 0 {
			t.Errorf("call %d: times %+v: want products reading %d weight bytes, pieces, no attention", call, spent, 3*count*in*width*2)
		}
		for i := range want {
			w, g := flat32(t, want[i]), flat32(t, got[i])
			for j := range w {
				if d := math.Abs(float64(w[j] - g[j])); d > 2e-2*(1+math.Abs(float64(w[j]))) {
					t.Fatalf("call %d, output %d[%d] = %v, the backend's %v", call, i, j, g[j], w[j])
				}
			}
		}
	}
}

// hostProductsOf multiplies each xs[i] [rows, in] by the panels ws[i] [n, in, w], every product
// before any reshape of their outputs, so that they run together.
func hostProductsOf(xs, ws []*Node) []*Node {
	ys := make([]*Node, len(xs))
	for i := range xs {
		ys[i] = DotGeneral(xs[i], []int{1}, nil, ws[i], []int{1}, nil)
	}
	for i, y := range ys {
		d := y.Shape().Dimensions
		ys[i] = Reshape(y, d[0], d[1]*d[2])
	}
	return ys
}

// TestScratchTakes checks that what a scratch hands out does not overlap until it is put back,
// across growth, and that a scratch put back is handed out again.
func TestScratchTakes(t *testing.T) {
	b := &Backend{}
	s := b.takeScratch()
	var taken [][]float32
	for i, n := range []int{3, 5, 100, 1, 7} {
		x := s.take(n)
		if len(x) != n || cap(x) != n {
			t.Fatalf("take(%d): len %d cap %d", n, len(x), cap(x))
		}
		for j := range x {
			x[j] = float32(i)
		}
		taken = append(taken, x)
	}
	for i, x := range taken {
		for _, v := range x {
			if v != float32(i) {
				t.Fatalf("take %d was overwritten: %v", i, x)
			}
		}
	}
	b.putScratch(s)
	if again := b.takeScratch(); again != s || again.used != 0 || len(again.widened) != 0 {
		t.Fatalf("scratch put back: got %p (used %d), want %p emptied", again, again.used, s)
	}
}
