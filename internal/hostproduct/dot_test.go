package hostproduct

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/gomlx/compute/dtypes/bfloat16"
)

// TestDotKernels multiplies eight bfloat16 rows by a bfloat16 panel (panel8dp: VDPBF16PS where
// this CPU has it) for lengths around the kernel's blocks of 32 pairs: on small integers, where
// every order of the sums is exact, each column against the plain sum, and on random values
// against panel8dpPlain, which sums as VDPBF16PS does, to the bit.
func TestDotKernels(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, in := range []int{0, 2, 4, 30, 62, 64, 66, 130, 1024} {
		for _, random := range []bool{false, true} {
			t.Run(fmt.Sprintf("in%d/random=%v", in, random), func(t *testing.T) {
				value := testValue(rng, random)
				w := testPanel(in, value)
				var xs [8][]uint16
				var ys, plain [8][]float32
				for r := range xs {
					xs[r] = make([]uint16, in)
					for k := range xs[r] {
						xs[r][k] = uint16(bfloat16.FromFloat32(value(k+3*r, 5)))
					}
					ys[r], plain[r] = make([]float32, kernelWidth), make([]float32, kernelWidth)
					for j := range ys[r] { // stale values the kernel must overwrite
						ys[r][j] = 99
					}
				}
				panel8dp(w, &xs, &ys, in)
				panel8dpPlain(w, &xs, &plain, in)
				for r := range xs {
					for j := range kernelWidth {
						want := plain[r][j]
						if !random {
							want = 0
							for k := range in {
								want += widen16(w[k*kernelWidth+j]) * widen16(xs[r][k])
							}
						}
						if ys[r][j] != want {
							t.Fatalf("row %d, column %d: %v, want %v", r, j, ys[r][j], want)
						}
					}
				}
			})
		}
	}
}

// testValue returns random normal values, or else small integers (i mod mod, centred on zero),
// whose products' sums are exact in any order.
func testValue(rng *rand.Rand, random bool) func(i, mod int) float32 {
	return func(i, mod int) float32 {
		if random {
			return float32(rng.NormFloat64())
		}
		return float32(i%mod) - float32(mod/2)
	}
}

// testPanel is a bfloat16 panel [in, 64] of value(i, 7) for its i-th value.
func testPanel(in int, value func(i, mod int) float32) []uint16 {
	w := make([]uint16, in*kernelWidth)
	for i := range w {
		w[i] = uint16(bfloat16.FromFloat32(value(i, 7)))
	}
	return w
}

// sumFloat64 is the sum of term(k) for k < n in float64, and the sum of their magnitudes, which
// bounds a float32 sum's rounding.
func sumFloat64(n int, term func(k int) float64) (sum, size float64) {
	for k := range n {
		v := term(k)
		sum += v
		size += math.Abs(v)
	}
	return sum, size
}

// TestDotPanels runs bfloat16 products (11 rows: eight by VDPBF16PS, three left to the other
// kernels; 37 rows, in place of the widened panels; all of them on AMX's tiles where those run)
// through productRun.panels with and without the VDPBF16PS and tile kernels, on random values,
// and checks that they agree within float32 sums' rounding, and that the kernels run only where
// the rows and panels allow them.
func TestDotPanels(t *testing.T) {
	if !dotKernels() {
		t.Skip("no VDPBF16PS kernels on this CPU or build")
	}
	rng := rand.New(rand.NewPCG(7, 8))
	defer func() { tilesOff = false }()
	const in, count = 96, 3
	w := make([]uint16, count*in*kernelWidth)
	for i := range w {
		w[i] = uint16(bfloat16.FromFloat32(float32(rng.NormFloat64() * 0.05)))
	}
	for _, rows := range []int{11, widenRows + 5} {
		p := &product{rows: rows, in: in, count: count, width: kernelWidth}
		x16 := make([]uint16, rows*in)
		x := make([]float32, len(x16))
		for i := range x16 {
			x16[i] = uint16(bfloat16.FromFloat32(float32(rng.NormFloat64())))
			x[i] = widen16(x16[i])
		}
		run := func(dot bool) []float32 {
			r := productRun{p: p, x: x, w16: w, y: make([]float32, rows*count*kernelWidth), yStride: count * kernelWidth}
			if dot {
				r.x16 = x16
			}
			if r.dots() != dot {
				t.Fatalf("%d rows: dots() = %v with the rows' bits %v", rows, r.dots(), dot)
			}
			r.panels(0, count)
			return r.y
		}
		for _, off := range []bool{true, false} { // the VDPBF16PS kernel, then AMX's tiles where they run
			tilesOff = off
			got, want := run(true), run(false)
			for i := range want {
				row, col := i/(count*kernelWidth), i%(count*kernelWidth)
				q, j := col/kernelWidth, col%kernelWidth
				exact, size := sumFloat64(in, func(k int) float64 { // to bound both float32 sums' rounding
					return float64(widen16(w[(q*in+k)*kernelWidth+j])) * float64(x[row*in+k])
				})
				bound := 1e-6 * size
				if math.Abs(float64(got[i])-exact) > bound || math.Abs(float64(want[i])-exact) > bound {
					t.Fatalf("%d rows, tiles off %v, value %d: VDPBF16PS or tiles %v, the other kernels %v, float64 %v", rows, off, i, got[i], want[i], exact)
				}
			}
		}
	}
	odd := &product{rows: 8, in: in + 1, count: 1, width: kernelWidth}
	if (productRun{p: odd, x16: make([]uint16, odd.rows*(in+1)), w16: make([]uint16, (in+1)*kernelWidth)}).dots() {
		t.Error("VDPBF16PS would run on an odd number of values a row")
	}
	few := &product{rows: 7, in: in, count: 1, width: kernelWidth}
	if (productRun{p: few, x16: make([]uint16, few.rows*in), w16: w[:in*kernelWidth]}).dots() {
		t.Error("VDPBF16PS would run on fewer than eight rows")
	}
	if (productRun{p: &product{rows: 8, in: in + 2, count: 1, width: kernelWidth}}).tiles() {
		t.Error("the tiles would run on rows of a length not a multiple of 32")
	}
}

// BenchmarkDotPanels multiplies 8, 16 and 128 bfloat16 rows (eight sequences' decode step, a
// short and a long prompt) by bfloat16 weights of Qwen3-0.6B's q, k and v (1024 → 4096), gate
// and up (1024 → 6144) and down (3072 → 1024) shapes on one core, by the VDPBF16PS kernel and by
// the kernels it replaces (the eight-row bfloat16 kernel, or from 32 rows on a panel widened to
// float32 once, then the float32 row kernels), alternated call by call, on panels the L3 holds,
// and reports each one's GFLOP/s and x_dot/widen, the first's speed over the second's. AMX's
// tiles stay off (BenchmarkTilePanels compares them with VDPBF16PS).
//
//	GOEXPERIMENT=simd go test ./internal/hostproduct -run '^$' -bench DotPanels
func BenchmarkDotPanels(b *testing.B) {
	if !dotKernels() {
		b.Skip("no VDPBF16PS kernels on this CPU or build")
	}
	tilesOff = true
	defer func() { tilesOff = false }()
	alternatePanels(b, &dotOff, "dot", "widen")
}

// alternatePanels runs productRun.panels for BenchmarkDotPanels' shapes, alternated call by call
// with *off false (the kernels called on) and true (the kernels they replace, called without),
// and reports each one's GFLOP/s and x_on/without, the first's speed over the second's.
func alternatePanels(b *testing.B, off *bool, on, without string) {
	for _, c := range []struct{ rows, in, out int }{
		{8, 1024, 4096}, {8, 3072, 1024}, {16, 1024, 4096},
		{128, 1024, 4096}, {128, 1024, 6144}, {128, 3072, 1024},
	} {
		b.Run(fmt.Sprintf("rows%d/%dx%d", c.rows, c.in, c.out), func(b *testing.B) {
			rows, count := c.rows, c.out/kernelWidth
			p := &product{rows: rows, in: c.in, count: count, width: kernelWidth}
			w := make([]uint16, count*c.in*kernelWidth)
			for i := range w {
				w[i] = uint16(bfloat16.FromFloat32(float32(i%7) * 0.01))
			}
			x16 := make([]uint16, rows*c.in)
			x := make([]float32, len(x16))
			for i := range x16 {
				x16[i] = uint16(bfloat16.FromFloat32(float32(i%13) * 0.1))
				x[i] = widen16(x16[i])
			}
			r := productRun{p: p, x: x, x16: x16, w16: w, y: make([]float32, rows*count*kernelWidth), yStride: count * kernelWidth}
			var spent [2]time.Duration
			defer func() { *off = false }()
			for i := 0; b.Loop(); i++ {
				*off = i%2 == 1
				begin := time.Now()
				r.panels(0, count)
				spent[i%2] += time.Since(begin)
			}
			flops := 2 * float64(rows*c.in*c.out) * float64(b.N/2)
			b.ReportMetric(flops/spent[0].Seconds()/1e9, "GFLOP/s_"+on)
			b.ReportMetric(flops/spent[1].Seconds()/1e9, "GFLOP/s_"+without)
			b.ReportMetric(spent[1].Seconds()/spent[0].Seconds(), "x_"+on+"/"+without)
		})
	}
}
