package hostproduct

import (
	"runtime"
	"sync"
	"testing"

	"github.com/gomlx/compute/dtypes/bfloat16"

	"github.com/octlm/octlm/internal/hugepage"
)

// TestPanelKernels checks panels32 and panels16, and each vector kernel this CPU can run, against
// a plain sum on small integers, exact in any order of summation, for the kernels' width and
// another (the plain loops').
func TestPanelKernels(t *testing.T) {
	for _, tc := range []struct {
		name         string
		in, n, width int
	}{
		{"kernel-width", 24, 3 * kernelWidth, kernelWidth},
		{"one-panel", 7, kernelWidth, kernelWidth},
		{"width-16", 10, 48, 16},
		{"odd-rows", 9, 2 * kernelWidth, kernelWidth},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := make([]float32, tc.n*tc.in)
			half := make([]uint16, tc.n*tc.in)
			x := make([]float32, tc.in)
			for i := range x {
				x[i] = float32(i%5) - 2
			}
			for i := range w {
				w[i] = float32(i%7) - 3
				half[i] = uint16(bfloat16.FromFloat32(w[i])) // exact: small integers
			}
			y32, y16 := make([]float32, tc.n), make([]float32, tc.n)
			panels32(w, x, y32, tc.in, tc.width)
			panels16(half, x, y16, tc.in, tc.width)

			check := func(kernel string, y32, y16 []float32) {
				t.Helper()
				for c := range tc.n {
					want := float32(0)
					for k := range tc.in {
						want += w[((c/tc.width)*tc.in+k)*tc.width+c%tc.width] * x[k]
					}
					if y32[c] != want || y16[c] != want {
						t.Fatalf("%s column %d: float32 %v, bfloat16 %v, want %v", kernel, c, y32[c], y16[c], want)
					}
				}
			}
			check("panels32/panels16", y32, y16)
			if tc.width != kernelWidth {
				return
			}
			for _, v := range kernelVariants() { // each vector kernel, not only the one chosen
				clear(y32)
				clear(y16)
				v.f32(w, x, y32, tc.in)
				v.bf16(half, x, y16, tc.in)
				check(v.name, y32, y16)
			}
		})
	}
}

// BenchmarkPanels multiplies one row by a weight of Qwen3-0.6B's head size (1024 → 151,936)
// held as panels of 64 columns on huge pages, one goroutine per GOMAXPROCS, in float32 and in
// bfloat16 widened in registers, and reports the weight's GB/s: set it beside octlm's
// BenchmarkMatMulPanels "rows1/panels" (compute v0.1.14's small kernel on the same panels, a
// row padded to its four-row tile) and bench's BenchmarkSumLoads (a plain read).
//
//	GOEXPERIMENT=simd go test ./internal/hostproduct -run '^$' -bench Panels -benchtime 30x
func BenchmarkPanels(b *testing.B) {
	const in, out = 1024, 151936 / kernelWidth * kernelWidth
	workers := runtime.GOMAXPROCS(0)
	w := make([]float32, in*out)
	half := make([]uint16, in*out)
	hugepage.AdviseSlice(w)
	hugepage.AdviseSlice(half)
	for i := range w {
		w[i] = float32(i%7) * 0.01
		half[i] = uint16(i)
	}
	x := make([]float32, in)
	y := make([]float32, out)
	panels := out / kernelWidth
	for _, c := range []struct {
		name string
		size int
		run  func(lo, hi int) // panels lo…hi-1
	}{
		{"f32", 4, func(lo, hi int) {
			panels32(w[lo*in*kernelWidth:hi*in*kernelWidth], x, y[lo*kernelWidth:hi*kernelWidth], in, kernelWidth)
		}},
		{"bf16", 2, func(lo, hi int) {
			panels16(half[lo*in*kernelWidth:hi*in*kernelWidth], x, y[lo*kernelWidth:hi*kernelWidth], in, kernelWidth)
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				var wg sync.WaitGroup
				for g := range workers {
					lo, hi := g*panels/workers, (g+1)*panels/workers
					wg.Go(func() { c.run(lo, hi) })
				}
				wg.Wait()
			}
			b.ReportMetric(float64(in*out*c.size)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
		})
	}
}

// BenchmarkStepProducts runs the products of one Qwen3-0.6B decode step (28 layers of queries,
// keys and values 1024 → 4096, output 2048 → 1024, gate and up 1024 → 6144, down 3072 → 1024,
// then the head 1024 → 151,936: 2.4 GB in float32, more than a server's L3) held as panels of 64
// columns on huge pages, each product's panels split over GOMAXPROCS goroutines, in float32 and
// in bfloat16, and reports the weights' GB/s: a decode step's products without the rest of the
// step.
//
//	GOEXPERIMENT=simd go test ./internal/hostproduct -run '^$' -bench StepProducts -benchtime 10x
func BenchmarkStepProducts(b *testing.B) {
	type weight struct{ in, out int }
	var weights []weight
	for range 28 {
		weights = append(weights, weight{1024, 4096}, weight{2048, 1024}, weight{1024, 6144}, weight{3072, 1024})
	}
	weights = append(weights, weight{1024, 151936 / kernelWidth * kernelWidth})
	total := 0
	for _, w := range weights {
		total += w.in * w.out
	}
	workers := runtime.GOMAXPROCS(0)
	x := make([]float32, 3072)
	y := make([]float32, 151936)
	step := func(b *testing.B, size int, run func(off, in, lo, hi int)) {
		for b.Loop() {
			off := 0
			for _, w := range weights {
				panels := w.out / kernelWidth
				var wg sync.WaitGroup
				for g := range workers {
					lo, hi := g*panels/workers, (g+1)*panels/workers
					wg.Go(func() { run(off, w.in, lo, hi) })
				}
				wg.Wait()
				off += w.in * w.out
			}
		}
		b.ReportMetric(float64(total*size)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
	}
	b.Run("f32", func(b *testing.B) {
		w := make([]float32, total)
		hugepage.AdviseSlice(w)
		for i := range w {
			w[i] = float32(i%7) * 0.01
		}
		step(b, 4, func(off, in, lo, hi int) {
			panels32(w[off+lo*in*kernelWidth:off+hi*in*kernelWidth], x[:in], y[lo*kernelWidth:hi*kernelWidth], in, kernelWidth)
		})
	})
	b.Run("bf16", func(b *testing.B) {
		w := make([]uint16, total)
		hugepage.AdviseSlice(w)
		for i := range w {
			w[i] = uint16(i)
		}
		step(b, 2, func(off, in, lo, hi int) {
			panels16(w[off+lo*in*kernelWidth:off+hi*in*kernelWidth], x[:in], y[lo*kernelWidth:hi*kernelWidth], in, kernelWidth)
		})
	})
}
