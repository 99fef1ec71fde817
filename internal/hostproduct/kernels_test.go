package hostproduct

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

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

// TestRowGroupKernels checks the four-row and eight-row kernels against a plain sum on small
// integers, exact in any order of summation, for a panel's depths around a prefetch distance,
// around the eight-row kernels' blocks of k (32 float32 steps, 64 bfloat16) and none; where the
// kernels do not run here, that they say so.
func TestRowGroupKernels(t *testing.T) {
	for _, kernel := range rowGroups {
		for _, in := range []int{0, 1, 7, 8, 9, 31, 32, 33, 63, 64, 65, 130} {
			w := make([]float32, in*kernelWidth)
			half := make([]uint16, len(w))
			for i := range w {
				w[i] = float32(i%7) - 3
				half[i] = uint16(bfloat16.FromFloat32(w[i]))
			}
			var xs, y32, y16 [8][]float32 // the first kernel.rows used
			for r := range kernel.rows {
				xs[r] = make([]float32, in)
				for k := range xs[r] {
					xs[r][k] = float32((k+3*r)%5) - 2
				}
				y32[r], y16[r] = make([]float32, kernelWidth), make([]float32, kernelWidth)
				for j := range kernelWidth { // stale values the kernels must overwrite
					y32[r][j], y16[r][j] = 99, 99
				}
			}
			ran32 := kernel.multiply(w, nil, &xs, &y32, in, kernelWidth)
			ran16 := kernel.multiply(nil, half, &xs, &y16, in, kernelWidth)
			if ran32 != ran16 {
				t.Fatalf("%d rows, in %d: the float32 kernel ran %v, the bfloat16 one %v", kernel.rows, in, ran32, ran16)
			}
			if !ran32 {
				t.Skip("no row-group kernels on this CPU or build")
			}
			if kernel.multiply(w, nil, &xs, &y32, in, 16) || kernel.multiply(nil, half, &xs, &y16, in, 16) {
				t.Fatalf("the %d-row kernels ran at width 16", kernel.rows)
			}
			for r := range kernel.rows {
				for j := range kernelWidth {
					want := float32(0)
					for k := range in {
						want += w[k*kernelWidth+j] * xs[r][k]
					}
					if y32[r][j] != want || y16[r][j] != want {
						t.Fatalf("%d rows, in %d, row %d, column %d: float32 %v, bfloat16 %v, want %v",
							kernel.rows, in, r, j, y32[r][j], y16[r][j], want)
					}
				}
			}
		}
	}
}

// BenchmarkRowKernels multiplies eight rows by weights of Qwen3-0.6B's gate-and-up (1024 →
// 6144) and down (3072 → 1024) shapes, 1 GiB in all (more than a server's L3), as panels on huge
// pages shared over GOMAXPROCS goroutines, panel by panel as productRun.panels goes: every row
// by the one-row kernel ("one"), the rows four at a time by the four-row kernels ("four", the
// second four reading the panel from the level-2 cache) and all eight by the eight-row kernels
// as productRun.panels multiplies them ("eight"), alternated call by call, and reports each
// one's weight GB/s and the speed-ups x_four/one and x_eight/four.
//
//	GOEXPERIMENT=simd go test ./internal/hostproduct -run '^$' -bench RowKernels -benchtime 4x
func BenchmarkRowKernels(b *testing.B) {
	const rows = 8
	workers := runtime.GOMAXPROCS(0)
	for _, sh := range []struct{ in, out int }{{1024, 6144}, {3072, 1024}} {
		copies := (1 << 29) / (sh.in * sh.out)
		total := copies * sh.in * sh.out
		for _, dt := range []string{"f32", "bf16"} {
			b.Run(fmt.Sprintf("%dx%d/%s", sh.in, sh.out, dt), func(b *testing.B) {
				p := &product{rows: rows, in: sh.in, count: sh.out / kernelWidth, width: kernelWidth}
				x := make([]float32, rows*sh.in)
				for i := range x {
					x[i] = float32(i%13) * 0.1
				}
				var w32 []float32
				var w16 []uint16
				size := 4
				if dt == "f32" {
					w32 = make([]float32, total)
					hugepage.AdviseSlice(w32)
					for i := range w32 {
						w32[i] = float32(i%7) * 0.01
					}
				} else {
					size, w16 = 2, make([]uint16, total)
					hugepage.AdviseSlice(w16)
					for i := range w16 {
						w16[i] = uint16(bfloat16.FromFloat32(float32(i%7) * 0.01))
					}
				}
				y := make([]float32, rows*sh.out)
				row := func(i, q int) ([]float32, []float32) {
					return x[i*sh.in : (i+1)*sh.in], y[i*sh.out+q*kernelWidth : i*sh.out+(q+1)*kernelWidth]
				}
				// byPanel multiplies panel q of copy c by the rows as mode says.
				byPanel := func(mode string, c, q int) {
					per, panel := sh.in*sh.out, sh.in*kernelWidth
					off := c*per + q*panel
					switch mode {
					case "one":
						for i := range rows {
							xi, yi := row(i, q)
							if w32 != nil {
								panels32(w32[off:off+panel], xi, yi, sh.in, kernelWidth)
							} else {
								panels16(w16[off:off+panel], xi, yi, sh.in, kernelWidth)
							}
						}
					case "four":
						for first := 0; first < rows; first += 4 {
							var xs, ys [4][]float32
							for i := range 4 {
								xs[i], ys[i] = row(first+i, q)
							}
							if w32 != nil {
								panel4x32(w32[off:off+panel], &xs, &ys, sh.in, kernelWidth)
							} else {
								panel4x16(w16[off:off+panel], &xs, &ys, sh.in, kernelWidth)
							}
						}
					default:
						r := productRun{p: p, x: x, y: y}
						if w32 != nil {
							r.w32 = w32[c*per : (c+1)*per]
						} else {
							r.w16 = w16[c*per : (c+1)*per]
						}
						r.panels(q, q+1)
					}
				}
				pass := func(mode string) time.Duration {
					begin := time.Now()
					for c := range copies {
						var wg sync.WaitGroup
						for g := range workers {
							lo, hi := g*p.count/workers, (g+1)*p.count/workers
							wg.Go(func() {
								for q := lo; q < hi; q++ {
									byPanel(mode, c, q)
								}
							})
						}
						wg.Wait()
					}
					return time.Since(begin)
				}
				var one, four, eight time.Duration
				for b.Loop() {
					one += pass("one")
					four += pass("four")
					eight += pass("eight")
				}
				gb := float64(total*size) * float64(b.N) / 1e9
				b.ReportMetric(gb/one.Seconds(), "GB/s_one")
				b.ReportMetric(gb/four.Seconds(), "GB/s_four")
				b.ReportMetric(gb/eight.Seconds(), "GB/s_eight")
				b.ReportMetric(one.Seconds()/four.Seconds(), "x_four/one")
				b.ReportMetric(four.Seconds()/eight.Seconds(), "x_eight/four")
			})
		}
	}
}
