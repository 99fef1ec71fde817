//go:build goexperiment.simd

package octlm

import (
	"runtime"
	"simd/archsimd"
	"sync"
	"testing"
	"unsafe"

	"github.com/octlm/octlm/internal/hugepage"
)

// This file measures what a product written in Go can read on this machine, against compute's
// small kernel (BenchmarkMatMulPanels): the evidence for multiplying decode's weights outside the
// graph (docs/performance.md, "Products outside compute"), not used by the model.

// hostPanels32 is one row times a float32 weight held as panels of 16 columns, [n/16, in, 16]:
// y[q·16+j] = Σ_k w[q][k][j]·x[k], four accumulators, a pointer stepped through the panels (see
// bench/sum_simd_amd64.go for why not slice indexing). in must be a multiple of 4.
func hostPanels32(w, x, y []float32, in int) {
	panels := len(w) / (in * 16)
	p := unsafe.Pointer(unsafe.SliceData(w))
	xp := unsafe.Pointer(unsafe.SliceData(x))
	for q := 0; q < panels; q++ {
		var a0, a1, a2, a3 archsimd.Float32x16
		for k := 0; k < in; k += 4 {
			xk := (*[4]float32)(unsafe.Add(xp, k*4))
			a0 = archsimd.LoadFloat32x16Array((*[16]float32)(p)).MulAdd(archsimd.BroadcastFloat32x16(xk[0]), a0)
			a1 = archsimd.LoadFloat32x16Array((*[16]float32)(unsafe.Add(p, 64))).MulAdd(archsimd.BroadcastFloat32x16(xk[1]), a1)
			a2 = archsimd.LoadFloat32x16Array((*[16]float32)(unsafe.Add(p, 128))).MulAdd(archsimd.BroadcastFloat32x16(xk[2]), a2)
			a3 = archsimd.LoadFloat32x16Array((*[16]float32)(unsafe.Add(p, 192))).MulAdd(archsimd.BroadcastFloat32x16(xk[3]), a3)
			p = unsafe.Add(p, 256)
		}
		a0.Add(a1).Add(a2.Add(a3)).StoreArray((*[16]float32)(y[q*16:]))
	}
}

// widen turns 16 bfloat16 values into float32 (their bits shifted to the high half).
func widen(v archsimd.Uint16x16) archsimd.Float32x16 {
	return v.ExtendToUint32().ShiftAllLeft(16).AsFloat32x16()
}

// hostPanels16 is hostPanels32 for a bfloat16 weight, widened in registers.
func hostPanels16(w []uint16, x, y []float32, in int) {
	panels := len(w) / (in * 16)
	p := unsafe.Pointer(unsafe.SliceData(w))
	xp := unsafe.Pointer(unsafe.SliceData(x))
	for q := 0; q < panels; q++ {
		var a0, a1, a2, a3 archsimd.Float32x16
		for k := 0; k < in; k += 4 {
			xk := (*[4]float32)(unsafe.Add(xp, k*4))
			a0 = widen(archsimd.LoadUint16x16Array((*[16]uint16)(p))).MulAdd(archsimd.BroadcastFloat32x16(xk[0]), a0)
			a1 = widen(archsimd.LoadUint16x16Array((*[16]uint16)(unsafe.Add(p, 32)))).MulAdd(archsimd.BroadcastFloat32x16(xk[1]), a1)
			a2 = widen(archsimd.LoadUint16x16Array((*[16]uint16)(unsafe.Add(p, 64)))).MulAdd(archsimd.BroadcastFloat32x16(xk[2]), a2)
			a3 = widen(archsimd.LoadUint16x16Array((*[16]uint16)(unsafe.Add(p, 96)))).MulAdd(archsimd.BroadcastFloat32x16(xk[3]), a3)
			p = unsafe.Add(p, 128)
		}
		a0.Add(a1).Add(a2.Add(a3)).StoreArray((*[16]float32)(y[q*16:]))
	}
}

func TestHostPanels(t *testing.T) {
	const in, n = 64, 48
	w := make([]float32, n*in)
	wb := make([]uint16, n*in)
	x := make([]float32, in)
	for i := range x {
		x[i] = float32(i%5) - 2
	}
	for i := range w {
		w[i] = float32(i%7) - 3
		wb[i] = uint16(*(*uint32)(unsafe.Pointer(&w[i])) >> 16)
	}
	y, yb := make([]float32, n), make([]float32, n)
	hostPanels32(w, x, y, in)
	hostPanels16(wb, x, yb, in)
	for q := 0; q < n/16; q++ {
		for j := 0; j < 16; j++ {
			want := float32(0)
			for k := 0; k < in; k++ {
				want += w[(q*in+k)*16+j] * x[k]
			}
			if y[q*16+j] != want || yb[q*16+j] != want { // small integers: exact in any order
				t.Fatalf("row %d: float32 %v, bfloat16 %v, want %v", q*16+j, y[q*16+j], yb[q*16+j], want)
			}
		}
	}
}

// BenchmarkHostPanels is one row times a weight of Qwen3-0.6B's head size (1024 → 151,936) as
// panels of 16 columns on huge pages, in float32 and bfloat16, through hostPanels32 and
// hostPanels16 on one goroutine per GOMAXPROCS: the weight's GB/s a Go product reaches, to set
// beside BenchmarkMatMulPanels (compute's small kernel) and bench's BenchmarkSumLoads (a plain read).
//
// On a 2-core Intel Xeon (Emerald Rapids, 2026-12-05, three runs, two alternated with
// BenchmarkMatMulPanels's one-row products): float32 19.8–29.7 GB/s, bfloat16 14.8–20.5, where
// compute's small kernel read 18.8–20.8 and 11.8–13.2 from its panels of 64, 22.0–25.9 and
// 12.9–13.8 from rows, and a plain read (BenchmarkSumLoads) 31–34.
func BenchmarkHostPanels(b *testing.B) {
	const in, out = 1024, fullVocab
	workers := runtime.GOMAXPROCS(0)
	w := make([]float32, in*out)
	wb := make([]uint16, in*out)
	hugepage.AdviseSlice(w)
	hugepage.AdviseSlice(wb)
	for i := range w {
		w[i] = float32(i%7) * 0.01
		wb[i] = uint16(i)
	}
	x := make([]float32, in)
	y := make([]float32, out)
	per := out / 16 / workers * 16
	for _, dt := range []string{"f32", "bf16"} {
		b.Run(dt, func(b *testing.B) {
			for b.Loop() {
				var wg sync.WaitGroup
				for g := range workers {
					lo, hi := g*per, (g+1)*per
					if g == workers-1 {
						hi = out / 16 * 16
					}
					wg.Go(func() {
						if dt == "f32" {
							hostPanels32(w[lo*in:hi*in], x, y[lo:hi], in)
						} else {
							hostPanels16(wb[lo*in:hi*in], x, y[lo:hi], in)
						}
					})
				}
				wg.Wait()
			}
			size := 4
			if dt == "bf16" {
				size = 2
			}
			b.ReportMetric(float64(in*out*size)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
		})
	}
}
