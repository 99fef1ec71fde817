//go:build goexperiment.simd

package bench

import (
	"math/rand/v2"
	"runtime"
	"simd/archsimd"
	"testing"

	"github.com/octlm/octlm/internal/hugepage"
)

// TestSumPaths: each vector sum this CPU can run gives the exact sum of small integers at lengths
// around its step (32 and 64 floats) and the tail it leaves to sumScalar.
func TestSumPaths(t *testing.T) {
	paths := []struct {
		name string
		have bool
		sum  func([]float32) float32
	}{
		{"avx512", haveAVX512, sumAVX512},
		{"avx2", haveAVX2, sumAVX2},
		{"indexed", haveAVX512, sumIndexed},
	}
	r := rand.New(rand.NewPCG(3, 4))
	for _, p := range paths {
		if !p.have {
			t.Logf("%s: this CPU lacks it", p.name)
			continue
		}
		for _, n := range []int{0, 1, 31, 32, 33, 63, 64, 65, 127, 128, 129, 4096 + 5} {
			a := make([]float32, n)
			want := 0.0
			for i := range a {
				a[i] = float32(r.IntN(200) - 100) // small integers: every order of summation is exact
				want += float64(a[i])
			}
			if got := p.sum(a); float64(got) != want {
				t.Errorf("%s, n=%d: sum = %v, want %v", p.name, n, got, want)
			}
		}
	}
}

// BenchmarkSumLoads is the reproduction of the slower code Go 1.27.4 generates for archsimd loads
// through slice indexing: the same four-accumulator AVX-512 sum over 512 MiB (more than the Xeon's
// 300 MiB of L3 it was measured on), on huge pages, one goroutine per GOMAXPROCS, its loads
// written as archsimd.LoadFloat32x16(a[i:]) ("indexed") and as loads from a pointer stepped
// through the buffer ("pointer", what ReadBandwidth uses). The bytes per second are the read
// bandwidth each reaches.
func BenchmarkSumLoads(b *testing.B) {
	if !haveAVX512 {
		b.Skip("this CPU has no AVX-512")
	}
	buf := make([]float32, 128<<20)
	hugepage.AdviseSlice(buf)
	for i := range buf {
		buf[i] = 1
	}
	workers := runtime.GOMAXPROCS(0)
	for _, c := range []struct {
		name string
		sum  func([]float32) float32
	}{{"indexed", sumIndexed}, {"pointer", sumAVX512}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(4 * len(buf)))
			for b.Loop() {
				readPass(buf, workers, c.sum)
			}
		})
	}
}

// sumIndexed is sumAVX512's loop written with slice indexing, as sum_simd_amd64.go's sum was
// before 2026-12-05 (then with AVX2): BenchmarkSumLoads's reproduction of the slower code Go
// generates for it.
func sumIndexed(a []float32) float32 {
	var s0, s1, s2, s3 archsimd.Float32x16
	i := 0
	for ; i+64 <= len(a); i += 64 {
		s0 = s0.Add(archsimd.LoadFloat32x16(a[i:]))
		s1 = s1.Add(archsimd.LoadFloat32x16(a[i+16:]))
		s2 = s2.Add(archsimd.LoadFloat32x16(a[i+32:]))
		s3 = s3.Add(archsimd.LoadFloat32x16(a[i+48:]))
	}
	var lanes [16]float32
	s0.Add(s1).Add(s2.Add(s3)).StoreArray(&lanes)
	return sumScalar(lanes[:]) + sumScalar(a[i:])
}
