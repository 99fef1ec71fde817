//go:build goexperiment.simd

package octlm

import (
	"runtime"
	"simd/archsimd"
	"sync"
	"testing"
	"unsafe"

	"github.com/gomlx/compute/dtypes/bfloat16"

	"github.com/octlm/octlm/internal/hugepage"
)

// This file measures what a product written in Go can read on this machine from the go layout's
// panels of 64 columns ([n/64, in, 64], Layout.PiecePanels), against compute's small kernel
// (BenchmarkMatMulPanels): the evidence for docs/performance.md's "Reading at the bandwidth on
// the Xeon". Not used by the model.

// panelWidth is the go layout's panel width (goPiecePanels), the columns one tile covers.
const panelWidth = 64

// hostPanels1 is one row x times a float32 weight held as panels of 64 columns: y[q·64+j] =
// Σ_k w[q][k][j]·x[k], one broadcast, four loads and four multiply-adds a step of k, a pointer
// stepped through the panels (bench/sum_simd_amd64.go says why not slice indexing).
func hostPanels1(w, x, y []float32, in int) {
	p := unsafe.Pointer(unsafe.SliceData(w))
	for q := range len(w) / (in * panelWidth) {
		var a0, a1, a2, a3 archsimd.Float32x16
		for k := range in {
			xk := archsimd.BroadcastFloat32x16(x[k])
			a0 = archsimd.LoadFloat32x16Array((*[16]float32)(p)).MulAdd(xk, a0)
			a1 = archsimd.LoadFloat32x16Array((*[16]float32)(unsafe.Add(p, 64))).MulAdd(xk, a1)
			a2 = archsimd.LoadFloat32x16Array((*[16]float32)(unsafe.Add(p, 128))).MulAdd(xk, a2)
			a3 = archsimd.LoadFloat32x16Array((*[16]float32)(unsafe.Add(p, 192))).MulAdd(xk, a3)
			p = unsafe.Add(p, 4*panelWidth)
		}
		out := y[q*panelWidth:]
		a0.Store(out)
		a1.Store(out[16:])
		a2.Store(out[32:])
		a3.Store(out[48:])
	}
}

// widen turns 16 bfloat16 values into float32 (their bits shifted to the high half).
func widen(v archsimd.Uint16x16) archsimd.Float32x16 {
	return v.ExtendToUint32().ShiftAllLeft(16).AsFloat32x16()
}

// hostPanels1Half is hostPanels1 for a bfloat16 weight, widened in registers.
func hostPanels1Half(w []uint16, x, y []float32, in int) {
	p := unsafe.Pointer(unsafe.SliceData(w))
	for q := range len(w) / (in * panelWidth) {
		var a0, a1, a2, a3 archsimd.Float32x16
		for k := range in {
			xk := archsimd.BroadcastFloat32x16(x[k])
			a0 = widen(archsimd.LoadUint16x16Array((*[16]uint16)(p))).MulAdd(xk, a0)
			a1 = widen(archsimd.LoadUint16x16Array((*[16]uint16)(unsafe.Add(p, 32)))).MulAdd(xk, a1)
			a2 = widen(archsimd.LoadUint16x16Array((*[16]uint16)(unsafe.Add(p, 64)))).MulAdd(xk, a2)
			a3 = widen(archsimd.LoadUint16x16Array((*[16]uint16)(unsafe.Add(p, 96)))).MulAdd(xk, a3)
			p = unsafe.Add(p, 2*panelWidth)
		}
		out := y[q*panelWidth:]
		a0.Store(out)
		a1.Store(out[16:])
		a2.Store(out[32:])
		a3.Store(out[48:])
	}
}

// TestHostPanels checks both products against a plain loop on small integers (exact in
// any order of summation).
func TestHostPanels(t *testing.T) {
	if !archsimd.X86.AVX512() {
		t.Skip("this CPU has no AVX-512")
	}
	const in, n = 24, 2 * panelWidth
	w := make([]float32, n*in)
	half := make([]uint16, n*in)
	x := make([]float32, in)
	for i := range x {
		x[i] = float32(i%5) - 2
	}
	for i := range w {
		w[i] = float32(i%7) - 3
		half[i] = uint16(bfloat16.FromFloat32(w[i])) // exact: small integers
	}
	y1, yh := make([]float32, n), make([]float32, n)
	hostPanels1(w, x, y1, in)
	hostPanels1Half(half, x, yh, in)
	for c := range n {
		want := float32(0)
		for k := range in {
			want += w[((c/panelWidth)*in+k)*panelWidth+c%panelWidth] * x[k]
		}
		if y1[c] != want || yh[c] != want {
			t.Fatalf("column %d: hostPanels1 %v, hostPanels1Half %v, want %v", c, y1[c], yh[c], want)
		}
	}
}

// BenchmarkHostPanels multiplies one row by a weight of Qwen3-0.6B's head size (1024 → 151,936)
// held as panels of 64 columns on huge pages, on one goroutine per GOMAXPROCS, in float32
// (hostPanels1) and in bfloat16 widened in registers (hostPanels1Half). It reports the weight's
// GB/s, to set beside BenchmarkMatMulPanels's "rows1/panels" (compute's small kernel on the same
// panels: its tile is four rows, so a one-row product is padded to four, pieceKernelRows, and does
// four times the multiply-adds) and bench's BenchmarkSumLoads (a plain read).
//
//	GOEXPERIMENT=simd go test ./octlm/ -run '^$' -bench HostPanels -benchtime 30x
func BenchmarkHostPanels(b *testing.B) {
	if !archsimd.X86.AVX512() {
		b.Skip("this CPU has no AVX-512")
	}
	const in, out = 1024, fullVocab / panelWidth * panelWidth
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
	panels := out / panelWidth
	for _, c := range []struct {
		name string
		size int
		run  func(lo, hi int) // panels lo…hi-1
	}{
		{"f32", 4, func(lo, hi int) { hostPanels1(w[lo*in*panelWidth:hi*in*panelWidth], x, y[lo*panelWidth:], in) }},
		{"bf16", 2, func(lo, hi int) {
			hostPanels1Half(half[lo*in*panelWidth:hi*in*panelWidth], x, y[lo*panelWidth:], in)
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
