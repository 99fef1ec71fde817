package octlm

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/dtypes/bfloat16"
	"github.com/gomlx/compute/dtypes/float16"
	"github.com/gomlx/compute/shapes"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // the graph DSL reads best unqualified
	"github.com/gomlx/gomlx/core/tensors"
)

// Tests of the pure-Go backend behaviours octlm relies on, which earlier GoMLX releases got
// wrong; each names what octlm would need if it broke again.

// TestScatterSumFloat16 adds float16 rows into a zeroed float16 cache as the graph's KV-cache write did
// (GoMLX v0.28.2 panicked here, so octlm kept float16 caches in float32).
func TestScatterSumFloat16(t *testing.T) {
	const heads, slots, width, rows = 2, 8, 4, 3
	exec, err := NewExec(goBackend(t), func(cache, rowsIn, start *Node) *Node {
		g := cache.Graph()
		head := Iota(g, shapes.Make(dtypes.Int32, heads, rows, 1), 0)
		slot := BroadcastToDims(Reshape(Add(start, Iota(g, shapes.Make(dtypes.Int32, rows), 0)), 1, rows, 1), heads, rows, 1)
		return ScatterSum(cache, Concatenate([]*Node{head, slot}, -1), rowsIn, true, true)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer exec.Finalize()
	values := make([]float16.Float16, heads*rows*width)
	for i := range values {
		values[i] = float16.FromFloat32(float32(i) + 0.5)
	}
	cache := tensors.FromShape(shapes.Make(dtypes.Float16, heads, slots, width))
	out, err := exec.Call(cache, tensors.FromFlatDataAndDimensions(values, heads, rows, width), int32(5))
	if err != nil {
		t.Fatal(err)
	}
	got := tensors.MustCopyFlatData[float16.Float16](out[0])
	for h := range heads {
		for s := range slots {
			for c := range width {
				want := float32(0)
				if r := s - 5; r >= 0 && r < rows {
					want = values[(h*rows+r)*width+c].Float32()
				}
				if g := got[(h*slots+s)*width+c].Float32(); g != want {
					t.Fatalf("cache[%d][%d][%d] = %v, want %v", h, s, c, g, want)
				}
			}
		}
	}
}

// TestHalfDotLastAxes multiplies half-precision operands with the right one contracted on its
// last axis (q·kᵀ, the head in row blocks), at sizes on both sides of the backend's small/large
// kernel threshold, and checks dotLastAxes against float64 sums of the same rounded values.
// It also measures the backend's own half-precision DotGeneral in this layout, which GoMLX
// v0.28.2 got wrong on some CPUs (an Intel AVX-512 machine; never reproduced on AMD Zen 5):
// dotLastAxes multiplies in float32 until that is shown fixed on both vendors, and the log
// says whether this CPU reproduces it.
func TestHalfDotLastAxes(t *testing.T) {
	for _, dt := range []dtypes.DType{dtypes.BFloat16, dtypes.Float16} {
		for _, sz := range []struct{ batch, m, n, k int }{{2, 3, 5, 64}, {8, 16, 192, 128}, {1, 4, 2048, 1024}} {
			name := fmt.Sprintf("%s/%dx%dx%dx%d", dt, sz.batch, sz.m, sz.n, sz.k)
			t.Run(name, func(t *testing.T) {
				lhs := randomTensor(t, dt, sz.batch, sz.m, sz.k)
				rhs := randomTensor(t, dt, sz.batch, sz.n, sz.k)
				want := dotLastAxesReference(t, lhs, rhs)
				for _, route := range []struct {
					name string
					fn   func(lhs, rhs *Node) *Node
				}{
					{"dotLastAxes", func(lhs, rhs *Node) *Node {
						return ConvertDType(ops{layout: Layout{UpcastHalfDot: true}}.dotLastAxes(lhs, rhs, 1), dtypes.Float32)
					}},
					{"backend", func(lhs, rhs *Node) *Node {
						return ConvertDType(DotGeneral(lhs, []int{2}, []int{0}, rhs, []int{2}, []int{0}), dtypes.Float32)
					}},
				} {
					exec, err := NewExec(goBackend(t), route.fn)
					if err != nil {
						t.Fatal(err)
					}
					out, err := exec.Call(lhs, rhs)
					exec.Finalize()
					if err != nil {
						t.Fatal(err)
					}
					got := tensors.MustCopyFlatData[float32](out[0])
					worst := 0.0
					for i, w := range want {
						worst = max(worst, math.Abs(float64(got[i])-w)/(1+math.Abs(w)))
					}
					// The result is rounded to the half type once: within a few of its steps.
					tolerance := 4 * math.Pow(2, -float64(mantissaBits(dt)))
					if route.name == "dotLastAxes" && worst > tolerance {
						t.Errorf("dotLastAxes: relative error %.3g > %.3g", worst, tolerance)
					}
					if route.name == "backend" {
						state := "correct"
						if worst > tolerance {
							state = "WRONG (the bug dotLastAxes works around)"
						}
						t.Logf("backend's own %s DotGeneral, rhs contracted on its last axis: relative error %.3g: %s on this CPU", dt, worst, state)
					}
				}
			})
		}
	}
}

func mantissaBits(dt dtypes.DType) int {
	if dt == dtypes.BFloat16 {
		return 7
	}
	return 10
}

// dotLastAxesReference is Σ_k lhs[b,i,k]·rhs[b,j,k] in float64 over half-precision tensors.
func dotLastAxesReference(t *testing.T, lhs, rhs *tensors.Tensor) []float64 {
	t.Helper()
	l, r := halfValues(lhs), halfValues(rhs)
	dl, dr := lhs.Shape().Dimensions, rhs.Shape().Dimensions
	batch, m, k, n := dl[0], dl[1], dl[2], dr[1]
	out := make([]float64, batch*m*n)
	for b := range batch {
		for i := range m {
			for j := range n {
				var s float64
				for c := range k {
					s += l[(b*m+i)*k+c] * r[(b*n+j)*k+c]
				}
				out[(b*m+i)*n+j] = s
			}
		}
	}
	return out
}

func halfValues(x *tensors.Tensor) []float64 {
	var out []float64
	x.MustConstFlatData(func(flat any) {
		switch f := flat.(type) {
		case []bfloat16.BFloat16:
			for _, v := range f {
				out = append(out, float64(v.Float32()))
			}
		case []float16.Float16:
			for _, v := range f {
				out = append(out, float64(v.Float32()))
			}
		}
	})
	return out
}

// TestGoParallelism runs the fixture through pure-Go backends limited to 1, 2 and 3 workers
// (GoMLX v0.28.2 deadlocked with a parallelism setting) to the same logits as the default.
func TestGoParallelism(t *testing.T) {
	ref := readReference(t, "tiny-qwen3")[0]
	for _, workers := range []int{1, 2, 3} {
		t.Run(fmt.Sprint(workers), func(t *testing.T) {
			backend, err := compute.NewWithConfig(fmt.Sprintf("go:parallelism=%d", workers))
			if err != nil {
				t.Fatal(err)
			}
			defer backend.Finalize()
			m, err := Load(fixtureDir("tiny-qwen3"), LoadOptions{Backend: backend})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			done := make(chan error, 1)
			var got Logits
			go func() {
				var err error
				got, err = m.Forward(ref.ids)
				done <- err
			}()
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(2 * time.Minute):
				t.Fatal("no result after 2 minutes: deadlocked")
			}
			if worst := maxAbsError(t, got, ref.logits); worst > 1e-4 {
				t.Errorf("max abs error %.3g", worst)
			}
		})
	}
}
