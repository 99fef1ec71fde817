//go:build goexperiment.simd

package bench

import (
	"simd/archsimd"
	"unsafe"
)

var (
	haveAVX2   = archsimd.X86.AVX2()
	haveAVX512 = archsimd.X86.AVX512()
)

// sumFloat32 sums a with four independent vector accumulators, 64-byte loads where the CPU
// has AVX-512 and 32-byte ones where it has AVX2, stepping a pointer through a: each load is
// one instruction, so the loop keeps as many cache-line reads in flight as the core allows.
//
// The same loop written with slice indexing (archsimd.LoadFloat32x16(a[i:]), sumIndexed
// below) compiles to about fourteen scalar instructions of bounds checks and slicing per
// load (Go 1.27.4), and on a 2-core Intel Xeon guest (Emerald Rapids, 2026-12-05) it read
// 22–24 GB/s where this loop and the same loop in C (gcc -O2) read 32–35:
// BenchmarkSumLoads is the reproduction.
func sumFloat32(a []float32) float32 {
	switch {
	case haveAVX512:
		return sumAVX512(a)
	case haveAVX2:
		return sumAVX2(a)
	}
	return sumScalar(a)
}

// sumAVX512 is sumFloat32's AVX-512 path: 64 floats (four cache lines) a step.
func sumAVX512(a []float32) float32 {
	var s0, s1, s2, s3 archsimd.Float32x16
	whole := len(a) &^ 63
	if whole > 0 {
		p := unsafe.Pointer(unsafe.SliceData(a))
		end := unsafe.Add(p, whole*4)
		for ; uintptr(p) < uintptr(end); p = unsafe.Add(p, 256) {
			s0 = s0.Add(archsimd.LoadFloat32x16Array((*[16]float32)(p)))
			s1 = s1.Add(archsimd.LoadFloat32x16Array((*[16]float32)(unsafe.Add(p, 64))))
			s2 = s2.Add(archsimd.LoadFloat32x16Array((*[16]float32)(unsafe.Add(p, 128))))
			s3 = s3.Add(archsimd.LoadFloat32x16Array((*[16]float32)(unsafe.Add(p, 192))))
		}
	}
	var lanes [16]float32
	s0.Add(s1).Add(s2.Add(s3)).StoreArray(&lanes)
	return sumScalar(lanes[:]) + sumScalar(a[whole:])
}

// sumAVX2 is sumFloat32's AVX2 path: 32 floats (two cache lines) a step.
func sumAVX2(a []float32) float32 {
	var s0, s1, s2, s3 archsimd.Float32x8
	whole := len(a) &^ 31
	if whole > 0 {
		p := unsafe.Pointer(unsafe.SliceData(a))
		end := unsafe.Add(p, whole*4)
		for ; uintptr(p) < uintptr(end); p = unsafe.Add(p, 128) {
			s0 = s0.Add(archsimd.LoadFloat32x8Array((*[8]float32)(p)))
			s1 = s1.Add(archsimd.LoadFloat32x8Array((*[8]float32)(unsafe.Add(p, 32))))
			s2 = s2.Add(archsimd.LoadFloat32x8Array((*[8]float32)(unsafe.Add(p, 64))))
			s3 = s3.Add(archsimd.LoadFloat32x8Array((*[8]float32)(unsafe.Add(p, 96))))
		}
	}
	var lanes [8]float32
	s0.Add(s1).Add(s2.Add(s3)).StoreArray(&lanes)
	return sumScalar(lanes[:]) + sumScalar(a[whole:])
}
