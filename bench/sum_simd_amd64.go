//go:build goexperiment.simd

package bench

import "simd/archsimd"

var haveAVX2 = archsimd.X86.AVX2()

// sumFloat32 sums a with four independent AVX2 accumulators: one 32-byte load per add, so
// the loop is bound by memory, not by the adds.
func sumFloat32(a []float32) float32 {
	if !haveAVX2 {
		return sumScalar(a)
	}
	var s0, s1, s2, s3 archsimd.Float32x8
	i := 0
	for ; i+32 <= len(a); i += 32 {
		s0 = s0.Add(archsimd.LoadFloat32x8(a[i:]))
		s1 = s1.Add(archsimd.LoadFloat32x8(a[i+8:]))
		s2 = s2.Add(archsimd.LoadFloat32x8(a[i+16:]))
		s3 = s3.Add(archsimd.LoadFloat32x8(a[i+24:]))
	}
	var lanes [8]float32
	s0.Add(s1).Add(s2.Add(s3)).StoreArray(&lanes)
	return sumScalar(lanes[:]) + sumScalar(a[i:])
}
