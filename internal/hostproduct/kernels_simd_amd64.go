//go:build goexperiment.simd && amd64

package hostproduct

import (
	"simd/archsimd"
	"unsafe"
)

// The kernels load through a pointer and a byte offset that steps through the panels: Go 1.27.4
// compiles a slice-indexed vector load with about 14 scalar instructions of bounds checks and
// slice arithmetic, which halves what a loop reads on an Intel Xeon (bench's BenchmarkSumLoads
// is the reproduction). Every pointer made stays inside the panels (checkptr, under -race,
// aborts on one past their end).

// kernelWidth is the panel width the vector kernels take; other widths run panelsScalar.
const kernelWidth = 64

var (
	haveAVX512 = archsimd.X86.AVX512()
	haveAVX2   = archsimd.X86.AVX2() && archsimd.X86.FMA()
)

// panels32 is x [in] times the float32 panels w [len(y)/width, in, width]: y[q·width+j] =
// Σ_k w[q][k][j]·x[k].
func panels32(w, x, y []float32, in, width int) {
	switch {
	case width == kernelWidth && haveAVX512:
		panels32AVX512(w, x, y, in)
	case width == kernelWidth && haveAVX2:
		panels32AVX2(w, x, y, in)
	default:
		panelsScalar(w, x, y, in, width)
	}
}

// panels16 is panels32 for bfloat16 panels (their bits), widened to float32 in registers.
func panels16(w []uint16, x, y []float32, in, width int) {
	switch {
	case width == kernelWidth && haveAVX512:
		panels16AVX512(w, x, y, in)
	case width == kernelWidth && haveAVX2:
		panels16AVX2(w, x, y, in)
	default:
		panelsScalar16(w, x, y, in, width)
	}
}

// kernelVariant is one vector kernel pair of width kernelWidth, for the tests.
type kernelVariant struct {
	name string
	f32  func(w, x, y []float32, in int)
	bf16 func(w []uint16, x, y []float32, in int)
}

// kernelVariants are the vector kernels this CPU can run.
func kernelVariants() []kernelVariant {
	var vs []kernelVariant
	if haveAVX2 {
		vs = append(vs, kernelVariant{"avx2", panels32AVX2, panels16AVX2})
	}
	if haveAVX512 {
		vs = append(vs, kernelVariant{"avx512", panels32AVX512, panels16AVX512})
	}
	return vs
}

func panels32AVX512(w, x, y []float32, in int) {
	if len(y) == 0 {
		return
	}
	_ = w[len(y)*in-1]
	x = x[:in]
	p, off := unsafe.Pointer(unsafe.SliceData(w)), 0
	for q := range len(y) / kernelWidth {
		var a0, a1, a2, a3 archsimd.Float32x16
		for _, v := range x {
			xk := archsimd.BroadcastFloat32x16(v)
			a0 = load32(p, off).MulAdd(xk, a0)
			a1 = load32(p, off+64).MulAdd(xk, a1)
			a2 = load32(p, off+128).MulAdd(xk, a2)
			a3 = load32(p, off+192).MulAdd(xk, a3)
			off += 4 * kernelWidth
		}
		store4(y[q*kernelWidth:], a0, a1, a2, a3)
	}
}

// load32 loads 16 float32 at p + off bytes.
func load32(p unsafe.Pointer, off int) archsimd.Float32x16 {
	return archsimd.LoadFloat32x16Array((*[16]float32)(unsafe.Add(p, off)))
}

// load16 loads 32 bfloat16 as 16 words at p + off bytes.
func load16(p unsafe.Pointer, off int) archsimd.Uint32x16 {
	return archsimd.LoadUint32x16Array((*[16]uint32)(unsafe.Add(p, off)))
}

// store4 stores 64 columns.
func store4(out []float32, a0, a1, a2, a3 archsimd.Float32x16) {
	a0.Store(out)
	a1.Store(out[16:])
	a2.Store(out[32:])
	a3.Store(out[48:])
}

func panels32AVX2(w, x, y []float32, in int) {
	if len(y) == 0 {
		return
	}
	_ = w[len(y)*in-1]
	x = x[:in]
	p, off := unsafe.Pointer(unsafe.SliceData(w)), 0
	for q := range len(y) / kernelWidth {
		var a [8]archsimd.Float32x8
		for _, v := range x {
			xk := archsimd.BroadcastFloat32x8(v)
			a[0] = archsimd.LoadFloat32x8Array((*[8]float32)(unsafe.Add(p, off))).MulAdd(xk, a[0])
			a[1] = archsimd.LoadFloat32x8Array((*[8]float32)(unsafe.Add(p, off+32))).MulAdd(xk, a[1])
			a[2] = archsimd.LoadFloat32x8Array((*[8]float32)(unsafe.Add(p, off+64))).MulAdd(xk, a[2])
			a[3] = archsimd.LoadFloat32x8Array((*[8]float32)(unsafe.Add(p, off+96))).MulAdd(xk, a[3])
			a[4] = archsimd.LoadFloat32x8Array((*[8]float32)(unsafe.Add(p, off+128))).MulAdd(xk, a[4])
			a[5] = archsimd.LoadFloat32x8Array((*[8]float32)(unsafe.Add(p, off+160))).MulAdd(xk, a[5])
			a[6] = archsimd.LoadFloat32x8Array((*[8]float32)(unsafe.Add(p, off+192))).MulAdd(xk, a[6])
			a[7] = archsimd.LoadFloat32x8Array((*[8]float32)(unsafe.Add(p, off+224))).MulAdd(xk, a[7])
			off += 4 * kernelWidth
		}
		out := y[q*kernelWidth : (q+1)*kernelWidth]
		for i := range a {
			a[i].Store(out[8*i:])
		}
	}
}

// widen8 turns 8 bfloat16 values into float32.
func widen8(v archsimd.Uint16x8) archsimd.Float32x8 {
	return v.ExtendToUint32().ShiftAllLeft(16).AsFloat32x8()
}

func panels16AVX2(w []uint16, x, y []float32, in int) {
	if len(y) == 0 {
		return
	}
	_ = w[len(y)*in-1]
	x = x[:in]
	p, off := unsafe.Pointer(unsafe.SliceData(w)), 0
	for q := range len(y) / kernelWidth {
		var a [8]archsimd.Float32x8
		for _, v := range x {
			xk := archsimd.BroadcastFloat32x8(v)
			a[0] = widen8(archsimd.LoadUint16x8Array((*[8]uint16)(unsafe.Add(p, off)))).MulAdd(xk, a[0])
			a[1] = widen8(archsimd.LoadUint16x8Array((*[8]uint16)(unsafe.Add(p, off+16)))).MulAdd(xk, a[1])
			a[2] = widen8(archsimd.LoadUint16x8Array((*[8]uint16)(unsafe.Add(p, off+32)))).MulAdd(xk, a[2])
			a[3] = widen8(archsimd.LoadUint16x8Array((*[8]uint16)(unsafe.Add(p, off+48)))).MulAdd(xk, a[3])
			a[4] = widen8(archsimd.LoadUint16x8Array((*[8]uint16)(unsafe.Add(p, off+64)))).MulAdd(xk, a[4])
			a[5] = widen8(archsimd.LoadUint16x8Array((*[8]uint16)(unsafe.Add(p, off+80)))).MulAdd(xk, a[5])
			a[6] = widen8(archsimd.LoadUint16x8Array((*[8]uint16)(unsafe.Add(p, off+96)))).MulAdd(xk, a[6])
			a[7] = widen8(archsimd.LoadUint16x8Array((*[8]uint16)(unsafe.Add(p, off+112)))).MulAdd(xk, a[7])
			off += 2 * kernelWidth
		}
		out := y[q*kernelWidth : (q+1)*kernelWidth]
		for i := range a {
			a[i].Store(out[8*i:])
		}
	}
}

// panels16AVX512 widens two bfloat16 values a 32-bit word: the word shifted left 16 is the even
// column's float32, the word masked to its high half the odd one's, so 32 columns cost one load,
// one shift and one and (widening 16 at a time, with a zero-extension and a shift, read
// 0.89–0.96 of its bytes per second, alternated); even and odd columns accumulate apart and are
// interleaved once a panel. It multiplies two panels at once, two streams of loads: a bfloat16
// decode step of Qwen3-0.6B ran 1.08–1.11× the tokens/s of one panel at a time on a 2-core
// Xeon, alternated (its products alone, as BenchmarkStepProducts runs them, 1.11–1.21×). In float32
// (panels32AVX512) two panels at once read 1.03–1.05× the bytes per second of the products
// alone, but the decode step ran at 0.94×: kept to one.
func panels16AVX512(w []uint16, x, y []float32, in int) {
	if len(y) == 0 {
		return
	}
	_ = w[len(y)*in-1]
	x = x[:in]
	p, n := unsafe.Pointer(unsafe.SliceData(w)), len(y)/kernelWidth
	high := archsimd.BroadcastUint32x16(0xffff0000)
	for q := 0; q < n; q += 2 {
		off := q * in * 2 * kernelWidth
		off2 := off + in*2*kernelWidth
		if q+1 == n { // the last of an odd count pairs with itself
			off2 = off
		}
		var e0, o0, e1, o1, f0, g0, f1, g1 archsimd.Float32x16
		for _, v := range x {
			xk := archsimd.BroadcastFloat32x16(v)
			lo, hi := load16(p, off), load16(p, off+64)
			e0 = lo.ShiftAllLeft(16).AsFloat32x16().MulAdd(xk, e0)
			o0 = lo.And(high).AsFloat32x16().MulAdd(xk, o0)
			e1 = hi.ShiftAllLeft(16).AsFloat32x16().MulAdd(xk, e1)
			o1 = hi.And(high).AsFloat32x16().MulAdd(xk, o1)
			lo, hi = load16(p, off2), load16(p, off2+64)
			f0 = lo.ShiftAllLeft(16).AsFloat32x16().MulAdd(xk, f0)
			g0 = lo.And(high).AsFloat32x16().MulAdd(xk, g0)
			f1 = hi.ShiftAllLeft(16).AsFloat32x16().MulAdd(xk, f1)
			g1 = hi.And(high).AsFloat32x16().MulAdd(xk, g1)
			off += 2 * kernelWidth
			off2 += 2 * kernelWidth
		}
		interleave(y[q*kernelWidth:], e0, o0, e1, o1)
		if q+1 < n {
			interleave(y[(q+1)*kernelWidth:], f0, g0, f1, g1)
		}
	}
}

// interleave stores 64 columns accumulated as the even and odd columns of two 32-column halves.
func interleave(out []float32, e0, o0, e1, o1 archsimd.Float32x16) {
	var even, odd [2][16]float32
	e0.Store(even[0][:])
	o0.Store(odd[0][:])
	e1.Store(even[1][:])
	o1.Store(odd[1][:])
	out = out[:kernelWidth]
	for h := range 2 {
		for i := range 16 {
			out[32*h+2*i] = even[h][i]
			out[32*h+2*i+1] = odd[h][i]
		}
	}
}
