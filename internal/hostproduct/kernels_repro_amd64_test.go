//go:build goexperiment.simd && amd64

package hostproduct

import (
	"simd/archsimd"
	"testing"
	"unsafe"
)

// panel4x32Archsimd is panel4x32's kernel written in archsimd, kept as the reproduction of why
// the four-row kernels are assembly: Go 1.27.4 keeps five of its sixteen accumulators on the
// stack and copies the others between registers every step of k (go build -gcflags=-S).
func panel4x32Archsimd(w []float32, x, y *[4][]float32, in int) {
	_ = w[in*kernelWidth-1]
	x0, x1, x2, x3 := x[0][:in], x[1][:in], x[2][:in], x[3][:in]
	p := unsafe.Pointer(unsafe.SliceData(w))
	var a0, a1, a2, a3, b0, b1, b2, b3, c0, c1, c2, c3, d0, d1, d2, d3 archsimd.Float32x16
	for k := range in {
		w0, w1, w2, w3 := load32(p, 0), load32(p, 64), load32(p, 128), load32(p, 192)
		p = unsafe.Add(p, 4*kernelWidth*min(1, in-1-k)) // stays inside the panel
		v := archsimd.BroadcastFloat32x16(x0[k])
		a0, a1, a2, a3 = w0.MulAdd(v, a0), w1.MulAdd(v, a1), w2.MulAdd(v, a2), w3.MulAdd(v, a3)
		v = archsimd.BroadcastFloat32x16(x1[k])
		b0, b1, b2, b3 = w0.MulAdd(v, b0), w1.MulAdd(v, b1), w2.MulAdd(v, b2), w3.MulAdd(v, b3)
		v = archsimd.BroadcastFloat32x16(x2[k])
		c0, c1, c2, c3 = w0.MulAdd(v, c0), w1.MulAdd(v, c1), w2.MulAdd(v, c2), w3.MulAdd(v, c3)
		v = archsimd.BroadcastFloat32x16(x3[k])
		d0, d1, d2, d3 = w0.MulAdd(v, d0), w1.MulAdd(v, d1), w2.MulAdd(v, d2), w3.MulAdd(v, d3)
	}
	store4(y[0], a0, a1, a2, a3)
	store4(y[1], b0, b1, b2, b3)
	store4(y[2], c0, c1, c2, c3)
	store4(y[3], d0, d1, d2, d3)
	archsimd.ClearAVXUpperBits()
}

// BenchmarkFourRowRegisters multiplies four rows by one float32 panel of 1,024 × 64 held in the
// L2 (arithmetic, not memory) with the assembly kernel and with panel4x32Archsimd, and reports
// the multiply-adds a second of each (on the 2-core Xeon, 2026-12-06, one run with the machine
// busy: 63 against 40 GMAC/s; the assembly alone on an idle core, 122).
//
//	GOEXPERIMENT=simd go test ./internal/hostproduct -run '^$' -bench FourRowRegisters -cpu 1
func BenchmarkFourRowRegisters(b *testing.B) {
	if !haveAVX512 {
		b.Skip("this CPU has no AVX-512")
	}
	const in = 1024
	w := make([]float32, in*kernelWidth)
	for i := range w {
		w[i] = float32(i%7) * 0.01
	}
	var xs, ys [4][]float32
	for r := range 4 {
		xs[r], ys[r] = make([]float32, in), make([]float32, kernelWidth)
	}
	for _, c := range []struct {
		name string
		run  func()
	}{
		{"assembly", func() { panel4x32(w, &xs, &ys, in, kernelWidth) }},
		{"archsimd", func() { panel4x32Archsimd(w, &xs, &ys, in) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				c.run()
			}
			b.ReportMetric(4*float64(len(w))*float64(b.N)/b.Elapsed().Seconds()/1e9, "GMAC/s")
		})
	}
}

// TestFourRowArchsimd keeps the reproduction honest: it computes what the assembly kernel does.
func TestFourRowArchsimd(t *testing.T) {
	if !haveAVX512 {
		t.Skip("this CPU has no AVX-512")
	}
	const in = 33
	w := make([]float32, in*kernelWidth)
	for i := range w {
		w[i] = float32(i%7) - 3
	}
	var xs, ya, yb [4][]float32
	for r := range 4 {
		xs[r] = make([]float32, in)
		for k := range xs[r] {
			xs[r][k] = float32((k+r)%5) - 2
		}
		ya[r], yb[r] = make([]float32, kernelWidth), make([]float32, kernelWidth)
	}
	panel4x32(w, &xs, &ya, in, kernelWidth)
	panel4x32Archsimd(w, &xs, &yb, in)
	for r := range 4 {
		for j := range kernelWidth {
			if ya[r][j] != yb[r][j] {
				t.Fatalf("row %d column %d: assembly %v, archsimd %v", r, j, ya[r][j], yb[r][j])
			}
		}
	}
}
