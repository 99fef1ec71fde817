//go:build goexperiment.simd

package octlm

import (
	"simd/archsimd"
	"unsafe"
)

var haveAVX2 = archsimd.X86.AVX2()

// transpose32 writes the transpose of the rows×cols matrix at src (row stride srcStride) to
// dst (row stride dstStride): dst[c·dstStride+r] = src[r·srcStride+c]. Whole 8×8 blocks go
// through AVX2 registers (eight loads, twelve shuffles, eight stores), the edges through
// transposeScalar.
func transpose32(dst []float32, dstStride int, src []float32, srcStride, rows, cols int) {
	if !haveAVX2 || rows < 8 || cols < 8 {
		transposeScalar(dst, dstStride, src, srcStride, rows, cols)
		return
	}
	d := unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(dst))), len(dst))
	s := unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(src))), len(src))
	r8, c8 := rows&^7, cols&^7
	for r := 0; r < r8; r += 8 {
		for c := 0; c < c8; c += 8 {
			transpose8x8(d[c*dstStride+r:], dstStride, s[r*srcStride+c:], srcStride)
		}
	}
	if c8 < cols {
		transposeScalar(dst[c8*dstStride:], dstStride, src[c8:], srcStride, rows, cols-c8)
	}
	if r8 < rows {
		transposeScalar(dst[r8:], dstStride, src[r8*srcStride:], srcStride, rows-r8, c8)
	}
}

// transpose8x8 transposes one 8×8 block of 32-bit values.
func transpose8x8(dst []uint32, dstStride int, src []uint32, srcStride int) {
	a := archsimd.LoadUint32x8(src)
	b := archsimd.LoadUint32x8(src[srcStride:])
	c := archsimd.LoadUint32x8(src[2*srcStride:])
	d := archsimd.LoadUint32x8(src[3*srcStride:])
	e := archsimd.LoadUint32x8(src[4*srcStride:])
	f := archsimd.LoadUint32x8(src[5*srcStride:])
	g := archsimd.LoadUint32x8(src[6*srcStride:])
	h := archsimd.LoadUint32x8(src[7*srcStride:])
	// Pairs of rows interleaved within each 128-bit half: [a0 b0 a1 b1 | a4 b4 a5 b5], ...
	ab0, ab1 := a.InterleaveLoGrouped(b).AsUint64x4(), a.InterleaveHiGrouped(b).AsUint64x4()
	cd0, cd1 := c.InterleaveLoGrouped(d).AsUint64x4(), c.InterleaveHiGrouped(d).AsUint64x4()
	ef0, ef1 := e.InterleaveLoGrouped(f).AsUint64x4(), e.InterleaveHiGrouped(f).AsUint64x4()
	gh0, gh1 := g.InterleaveLoGrouped(h).AsUint64x4(), g.InterleaveHiGrouped(h).AsUint64x4()
	// Then pairs of pairs: [a0 b0 c0 d0 | a4 b4 c4 d4], ...
	abcd0 := ab0.InterleaveLoGrouped(cd0).AsUint32x8()
	abcd1 := ab0.InterleaveHiGrouped(cd0).AsUint32x8()
	abcd2 := ab1.InterleaveLoGrouped(cd1).AsUint32x8()
	abcd3 := ab1.InterleaveHiGrouped(cd1).AsUint32x8()
	efgh0 := ef0.InterleaveLoGrouped(gh0).AsUint32x8()
	efgh1 := ef0.InterleaveHiGrouped(gh0).AsUint32x8()
	efgh2 := ef1.InterleaveLoGrouped(gh1).AsUint32x8()
	efgh3 := ef1.InterleaveHiGrouped(gh1).AsUint32x8()
	// Finally the 128-bit halves: column k of the block is row k of the result.
	abcd0.SetHi(efgh0.GetLo()).Store(dst)
	abcd1.SetHi(efgh1.GetLo()).Store(dst[dstStride:])
	abcd2.SetHi(efgh2.GetLo()).Store(dst[2*dstStride:])
	abcd3.SetHi(efgh3.GetLo()).Store(dst[3*dstStride:])
	efgh0.SetLo(abcd0.GetHi()).Store(dst[4*dstStride:])
	efgh1.SetLo(abcd1.GetHi()).Store(dst[5*dstStride:])
	efgh2.SetLo(abcd2.GetHi()).Store(dst[6*dstStride:])
	efgh3.SetLo(abcd3.GetHi()).Store(dst[7*dstStride:])
}
