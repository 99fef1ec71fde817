//go:build goexperiment.simd

package loader

import "simd/archsimd"

var haveAVX2 = archsimd.X86.AVX2()

// widenBF16Vector widens as many leading elements of in as whole AVX2 vectors allow
// (zero-extend 8 words to 8 dwords, shift left 16) and returns how many it did.
func widenBF16Vector(out []uint32, in []uint16) int {
	if !haveAVX2 {
		return 0
	}
	n := len(in) &^ 31
	for i := 0; i < n; i += 32 {
		a := archsimd.LoadUint16x8(in[i:]).ExtendToUint32().ShiftAllLeft(16)
		b := archsimd.LoadUint16x8(in[i+8:]).ExtendToUint32().ShiftAllLeft(16)
		c := archsimd.LoadUint16x8(in[i+16:]).ExtendToUint32().ShiftAllLeft(16)
		d := archsimd.LoadUint16x8(in[i+24:]).ExtendToUint32().ShiftAllLeft(16)
		a.Store(out[i:])
		b.Store(out[i+8:])
		c.Store(out[i+16:])
		d.Store(out[i+24:])
	}
	return n
}
