//go:build goexperiment.simd && amd64

package hostproduct

import (
	"math"
	"simd/archsimd"
	"slices"
	"unsafe"
)

// The kernels load through a pointer and a byte offset that steps through the panels: Go 1.27.4
// compiles a slice-indexed vector load with about 14 scalar instructions of bounds checks and
// slice arithmetic, which halves what a loop reads on an Intel Xeon (bench's BenchmarkSumLoads
// is the reproduction). Every pointer made stays inside the panels (checkptr, under -race,
// aborts on one past their end).

// Every vector kernel is followed by archsimd.ClearAVXUpperBits (VZEROUPPER): Go 1.27.4 does
// not emit it, and scalar float code that runs after a kernel, compiled to SSE instructions,
// then waits on the vector registers' dirty upper halves. Attention's first kernels without it
// took 6.5 ms for two calls of BenchmarkAttention, 56% of it in math.Exp right after them,
// against 0.24 ms with it (the same kernels). After the panels' kernels it made no difference a
// decode step could measure (alternated, float32 and bfloat16), but costs nothing there either.

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
		panels32Prefetched(w, x, y, in)
	case width == kernelWidth && haveAVX2:
		panels32AVX2(w, x, y, in)
		archsimd.ClearAVXUpperBits()
	default:
		panelsScalar(w, x, y, in, width)
	}
}

// panels16 is panels32 for bfloat16 panels (their bits), widened to float32 in registers.
func panels16(w []uint16, x, y []float32, in, width int) {
	switch {
	case width == kernelWidth && haveAVX512:
		panels16Prefetched(w, x, y, in)
	case width == kernelWidth && haveAVX2:
		panels16AVX2(w, x, y, in)
		archsimd.ClearAVXUpperBits()
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
		vs = append(vs, kernelVariant{"avx512", panels32Prefetched, panels16Prefetched})
	}
	return vs
}

// load32 loads 16 float32 at p + off bytes.
func load32(p unsafe.Pointer, off int) archsimd.Float32x16 {
	return archsimd.LoadFloat32x16Array((*[16]float32)(unsafe.Add(p, off)))
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

// vectorKernels says whether the AVX-512 kernels (attention's, the four-row products) run here.
func vectorKernels() bool { return haveAVX512 }

// scoresPair32 stores in s0 and s1 [0, m) the products of query rows q0 and q1 [hd] by the
// columns [0, m) of a transposed key block kt (hd rows of n slots): s[t] = Σ_d q[d]·kt[d·n+t].
// It may also store the products of some columns past m, up to n (vectorSlots): s0 and s1 hold
// at least n values.
func scoresPair32(q0, q1, kt []float32, n, m int, s0, s1 []float32) {
	scoresPairVia(q0, q1, kt, n, m, s0, s1, scoresPair32AVX512, func(x float32) float32 { return x })
}

// scoresPair16 is scoresPair32 for a bfloat16 key block (its bits).
func scoresPair16(q0, q1 []float32, kt []uint16, n, m int, s0, s1 []float32) {
	scoresPairVia(q0, q1, kt, n, m, s0, s1, func(q0, q1 []float32, kt []uint16, n, m int, s0, s1 []float32) {
		scoresPairTwoByte(q0, q1, kt, n, m, s0, s1, scoresStrip16Asm, scoresVec16Asm, scoresRows16Asm)
	}, widen16)
}

// scoresPairVia is scoresPair32 for a key block of T: the slots vectorSlots gives by vector,
// a kernel of this CPU's (AVX-512), the rest one at a time in plain Go, each key widened by float.
func scoresPairVia[T any](q0, q1 []float32, kt []T, n, m int, s0, s1 []float32,
	vector func(q0, q1 []float32, kt []T, n, m int, s0, s1 []float32), float func(T) float32) {
	v := 0
	if haveAVX512 {
		v = vectorSlots(n, m)
		vector(q0, q1, kt, n, v, s0, s1)
		archsimd.ClearAVXUpperBits()
	}
	scoresPairPlain(q0, q1, kt, n, v, m, s0, s1, float)
}

// vectorSlots is how many of a key block's n slots the vector kernels score for the first m:
// m rounded up to a vector's 16 where the block holds them (the extra slots' scores are never
// read), and m rounded down to 16 (the rest in plain Go) where it does not. In an 8-sequence
// step the plain tail and the 16-slot vectors were a third of the scores' time. Not rounded up
// to a strip's 64 slots: at decode the cache is read from memory, and a bfloat16 step's attention
// at depth 150 took 1.2–1.4× as long reading the strips' extra slots (alternated in one process).
func vectorSlots(n, m int) int {
	if up := (m + 15) &^ 15; up <= n {
		return up
	}
	return m &^ 15
}

// contextPair32 adds to c0 and c1 [hd] the value rows vb [m, hd] weighted by p0 and p1 [m]:
// c[j] += Σ_t p[t]·vb[t·hd+j].
func contextPair32(p0, p1, vb []float32, hd, m int, c0, c1 []float32) {
	if haveAVX512 && hd%kernelWidth == 0 {
		c := 0
		if m > 0 {
			_, _, _, _, _ = p0[m-1], p1[m-1], vb[m*hd-1], c0[hd-1], c1[hd-1]
			for ; c+128 <= hd; c += 128 {
				contextPair32x128Asm(unsafe.Pointer(&vb[c]), data(p0), data(p1), m, 4*hd, data(c0[c:]), data(c1[c:]))
			}
		}
		contextPair32AVX512(p0, p1, vb, hd, c, m, c0, c1)
		archsimd.ClearAVXUpperBits()
		return
	}
	contextPairPlain(p0, p1, vb, hd, m, c0, c1, func(x float32) float32 { return x })
}

// contextPair16 is contextPair32 for bfloat16 value rows (their bits). In assembly rather than
// archsimd (widening 16 values a load, two loads a row of 64 columns), a bfloat16 decode step's
// attention at depth 150 took half the time (BenchmarkAttention).
func contextPair16(p0, p1 []float32, vb []uint16, hd, m int, c0, c1 []float32) {
	contextPairHalves(p0, p1, vb, hd, m, c0, c1, contextPair16x128Asm, contextPair16x16Asm, widen16)
}

// scoresPairHalf is scoresPair32 for a float16 key block (its bits), each key widened exactly
// (VCVTPH2PS).
func scoresPairHalf(q0, q1 []float32, kt []uint16, n, m int, s0, s1 []float32) {
	scoresPairVia(q0, q1, kt, n, m, s0, s1, func(q0, q1 []float32, kt []uint16, n, m int, s0, s1 []float32) {
		scoresPairTwoByte(q0, q1, kt, n, m, s0, s1, scoresStripHalfAsm, scoresVecHalfAsm, scoresRowsHalfAsm)
	}, widenHalf)
}

// twoByteKernel is an assembly kernel over a key block or value rows of 2-byte values (float16
// or bfloat16), widened as loaded.
type twoByteKernel func(p, r0, r1 unsafe.Pointer, count, stride int, out0, out1 unsafe.Pointer)

// scoresPairTwoByte is the slots [0, m) of scoresPair32 for a key block of 2-byte values, m a
// multiple of 16: 64 slots at a time by strip, then 16 by vec; or by rows (byRows).
func scoresPairTwoByte(q0, q1 []float32, kt []uint16, n, m int, s0, s1 []float32, strip, vec twoByteKernel, rows rowsKernel) {
	hd := len(q0)
	if m == 0 || hd == 0 {
		return
	}
	_ = kt[(hd-1)*n+m-1]
	q1, s0, s1 = q1[:hd], s0[:m], s1[:m]
	p := unsafe.Pointer(unsafe.SliceData(kt))
	if byRows(hd, m) {
		scoresPairRows(p, q0, q1, hd, 2*n, m, s0, s1, rows)
		return
	}
	t := 0
	for ; t+64 <= m; t += 64 {
		_, _ = s0[t+63], s1[t+63]
		strip(unsafe.Add(p, 2*t), data(q0), data(q1), hd, 2*n, data(s0[t:]), data(s1[t:]))
	}
	for ; t < m; t += 16 {
		_, _ = s0[t+15], s1[t+15]
		vec(unsafe.Add(p, 2*t), data(q0), data(q1), hd, 2*n, data(s0[t:]), data(s1[t:]))
	}
}

// contextPairHalf is contextPair32 for float16 value rows (their bits), each value widened
// exactly (VCVTPH2PS).
func contextPairHalf(p0, p1 []float32, vb []uint16, hd, m int, c0, c1 []float32) {
	contextPairHalves(p0, p1, vb, hd, m, c0, c1, contextPairHalfx128Asm, contextPairHalfx16Asm, widenHalf)
}

// contextPairHalves is contextPair32 for value rows of 2-byte values: 128 columns at a time by
// x128, then 16 by x16, or in plain Go, each value widened by float, where this CPU lacks
// AVX-512 or hd is not a multiple of 16.
func contextPairHalves(p0, p1 []float32, vb []uint16, hd, m int, c0, c1 []float32, x128, x16 twoByteKernel, float func(uint16) float32) {
	if !haveAVX512 || hd%16 != 0 {
		contextPairPlain(p0, p1, vb, hd, m, c0, c1, float)
		return
	}
	if m == 0 {
		return
	}
	_, _, _, _, _ = p0[m-1], p1[m-1], vb[m*hd-1], c0[hd-1], c1[hd-1]
	c := 0
	for ; c+128 <= hd; c += 128 {
		x128(unsafe.Pointer(&vb[c]), data(p0), data(p1), m, 2*hd, data(c0[c:]), data(c1[c:]))
	}
	for ; c < hd; c += 16 {
		x16(unsafe.Pointer(&vb[c]), data(p0), data(p1), m, 2*hd, data(c0[c:]), data(c1[c:]))
	}
}

// load16x16 loads 16 bfloat16 at p + off bytes, widened.
func load16x16(p unsafe.Pointer, off int) archsimd.Float32x16 {
	return archsimd.LoadUint16x16Array((*[16]uint16)(unsafe.Add(p, off))).ExtendToUint32().ShiftAllLeft(16).AsFloat32x16()
}

// scoresPair32AVX512 is scoresPair32's slots [0, m), m a multiple of 16: 64 slots at a time
// (four vectors of each row's sums), the key block read down its hd rows; or by rows (byRows).
func scoresPair32AVX512(q0, q1, kt []float32, n, m int, s0, s1 []float32) {
	hd := len(q0)
	if m == 0 || hd == 0 {
		return
	}
	_ = kt[(hd-1)*n+m-1]
	q1, s0, s1 = q1[:hd], s0[:m], s1[:m]
	p := unsafe.Pointer(unsafe.SliceData(kt))
	if byRows(hd, m) {
		scoresPairRows(p, q0, q1, hd, 4*n, m, s0, s1, scoresRows32Asm)
		return
	}
	t := 0
	for ; t+64 <= m; t += 64 {
		_, _ = s0[t+63], s1[t+63]
		scoresStrip32Asm(unsafe.Add(p, 4*t), data(q0), data(q1), hd, 4*n, data(s0[t:]), data(s1[t:]))
	}
	for ; t < m; t += 16 {
		var a, b archsimd.Float32x16
		off := 4 * t
		for d, x := range q0 {
			k := load32(p, off)
			a, b = k.MulAdd(archsimd.BroadcastFloat32x16(x), a), k.MulAdd(archsimd.BroadcastFloat32x16(q1[d]), b)
			off += 4 * n
		}
		a.Store(s0[t:])
		b.Store(s1[t:])
	}
}

// contextPair32AVX512 is contextPair32 for hd a multiple of 64: 64 columns at a time, the value
// rows read down the slots.
func contextPair32AVX512(p0, p1, vb []float32, hd, from, m int, c0, c1 []float32) {
	if m == 0 {
		return
	}
	_ = vb[m*hd-1]
	p0, p1, c0, c1 = p0[:m], p1[:m], c0[:hd], c1[:hd]
	p := unsafe.Pointer(unsafe.SliceData(vb))
	for c := from; c < hd; c += kernelWidth {
		var a0, a1, a2, a3, b0, b1, b2, b3 archsimd.Float32x16
		off := 4 * c
		for t, x := range p0 {
			x0, x1 := archsimd.BroadcastFloat32x16(x), archsimd.BroadcastFloat32x16(p1[t])
			v0, v1, v2, v3 := load32(p, off), load32(p, off+64), load32(p, off+128), load32(p, off+192)
			a0, b0 = v0.MulAdd(x0, a0), v0.MulAdd(x1, b0)
			a1, b1 = v1.MulAdd(x0, a1), v1.MulAdd(x1, b1)
			a2, b2 = v2.MulAdd(x0, a2), v2.MulAdd(x1, b2)
			a3, b3 = v3.MulAdd(x0, a3), v3.MulAdd(x1, b3)
			off += 4 * hd
		}
		add4(c0[c:], a0, a1, a2, a3)
		add4(c1[c:], b0, b1, b2, b3)
	}
}

// add4 adds 64 columns to out.
func add4(out []float32, a0, a1, a2, a3 archsimd.Float32x16) {
	out = out[:kernelWidth]
	archsimd.LoadFloat32x16(out).Add(a0).Store(out)
	archsimd.LoadFloat32x16(out[16:]).Add(a1).Store(out[16:])
	archsimd.LoadFloat32x16(out[32:]).Add(a2).Store(out[32:])
	archsimd.LoadFloat32x16(out[48:]).Add(a3).Store(out[48:])
}

// panel4x32 multiplies four rows x[r] [in] by one float32 panel w [in, kernelWidth] into y[r]
// [kernelWidth], each weight loaded once for the four rows; false, nothing done, where this CPU
// lacks the kernel (AVX-512) or the width is not kernelWidth.
func panel4x32(w []float32, x, y *[4][]float32, in, width int) bool {
	if !groupRuns(x[:], y[:], in, width) {
		return false
	}
	if w = w[:in*kernelWidth]; in > 0 { // the slice checks the panel's length
		panel4x32Asm(unsafe.Pointer(unsafe.SliceData(w)), data(x[0]), data(x[1]), data(x[2]), data(x[3]),
			data(y[0]), data(y[1]), data(y[2]), data(y[3]), in)
	}
	return true
}

// panel4x16 is panel4x32 for a bfloat16 panel (its bits), widened in registers as
// panels16Prefetched widens it.
func panel4x16(w []uint16, x, y *[4][]float32, in, width int) bool {
	if !groupRuns(x[:], y[:], in, width) {
		return false
	}
	if w = w[:in*kernelWidth]; in > 0 { // the slice checks the panel's length
		var acc [16]archsimd.Float32x16
		panel4x16Asm(unsafe.Pointer(unsafe.SliceData(w)), data(x[0]), data(x[1]), data(x[2]), data(x[3]), in, &acc)
		for r := range 4 {
			interleave(y[r], acc[4*r], acc[4*r+1], acc[4*r+2], acc[4*r+3])
		}
		archsimd.ClearAVXUpperBits()
	}
	return true
}

// groupRuns says whether the row-group kernels (four or eight rows) run for rows x and outputs
// y, checking their lengths as slicing does (the kernels read and write through pointers); with
// in = 0 it zeroes y.
func groupRuns(x, y [][]float32, in, width int) bool {
	if !haveAVX512 || width != kernelWidth {
		return false
	}
	for r := range x {
		_, _ = x[r][:in], y[r][:kernelWidth]
		if in == 0 {
			clear(y[r][:kernelWidth])
		}
	}
	return true
}

// widenAll writes the bfloat16 values src (their bits) into dst as float32, len(src) ≤ len(dst).
func widenAll(dst []float32, src []uint16) {
	v := 0
	if haveAVX512 {
		dst = dst[:len(src)]
		v = len(src) &^ 15
		p := unsafe.Pointer(unsafe.SliceData(src))
		for i := 0; i < v; i += 16 {
			load16x16(p, 2*i).Store(dst[i:])
		}
		archsimd.ClearAVXUpperBits()
	}
	widenPlain(dst[v:], src[v:])
}

// biasMax adds bias to sc and returns the largest sum (−∞ for none), 16 at a time.
func biasMax(sc, bias []float32) float32 {
	if !haveAVX512 || len(sc) < 16 {
		return biasMaxPlain(sc, bias)
	}
	bias = bias[:len(sc)]
	v := len(sc) &^ 15
	highest := archsimd.BroadcastFloat32x16(float32(math.Inf(-1)))
	for t := 0; t < v; t += 16 {
		x := archsimd.LoadFloat32x16(sc[t:]).Add(archsimd.LoadFloat32x16(bias[t:]))
		x.Store(sc[t:])
		highest = highest.Max(x)
	}
	var lanes [16]float32
	highest.StoreArray(&lanes)
	archsimd.ClearAVXUpperBits()
	return max(slices.Max(lanes[:]), biasMaxPlain(sc[v:], bias[v:]))
}

// The constants of expSum's exp: Cephes' expf (ln 2 in two parts, and the polynomial for
// exp(r) − 1 − r over r² on |r| ≤ ln 2 / 2), and below expFloor the result is 0 (exp(−88) is
// 6e−39, and a slot masked with −∞ must weigh exactly nothing).
const (
	expLog2E   = 1.44269504088896341
	expLn2Hi   = 0.693359375
	expLn2Lo   = -2.12194440e-4
	expFloor   = -88
	expC0      = 5.0000001201e-1
	expC1      = 1.6666665459e-1
	expC2      = 4.1665795894e-2
	expC3      = 8.3334519073e-3
	expC4      = 1.3981999507e-3
	expC5      = 1.9875691500e-4
	expRoundTo = 0 // RoundScaled's precision: whole numbers
)

// expSum replaces each of sc by exp(sc − highest) and returns their sum, 16 at a time: a float32
// polynomial (within 3 ulp of math.Exp, TestSoftmaxPasses) where expSumPlain calls math.Exp in
// float64.
func expSum(sc []float32, highest float32) float32 {
	if !haveAVX512 || len(sc) < 16 {
		return expSumPlain(sc, highest)
	}
	v := len(sc) &^ 15
	top := archsimd.BroadcastFloat32x16(highest)
	floor := archsimd.BroadcastFloat32x16(expFloor)
	var sum archsimd.Float32x16
	for t := 0; t < v; t += 16 {
		x := archsimd.LoadFloat32x16(sc[t:]).Sub(top)
		e := exp16(x.Max(floor)).Masked(x.Greater(floor))
		e.Store(sc[t:])
		sum = sum.Add(e)
	}
	var lanes [16]float32
	sum.StoreArray(&lanes)
	archsimd.ClearAVXUpperBits()
	total := expSumPlain(sc[v:], highest)
	for _, l := range lanes {
		total += l
	}
	return total
}

// siluMul writes (gate·σ(gate))·up into y, 16 values at a time (sigmoid16).
func siluMul(gate, up, y []float32) {
	if !haveAVX512 || len(gate) < 16 {
		siluMulPlain(gate, up, y)
		return
	}
	v := len(gate) &^ 15
	_, _ = up[v-1], y[v-1]
	for t := 0; t < v; t += 16 {
		g := archsimd.LoadFloat32x16(gate[t:])
		g.Mul(sigmoid16(g)).Mul(archsimd.LoadFloat32x16(up[t:])).Store(y[t:])
	}
	archsimd.ClearAVXUpperBits()
	siluMulPlain(gate[v:], up[v:], y[v:])
}

// sigmoid16 is σ(x) = 1 / (1 + exp(−x)), exp16 taking −x clamped to ±88 (beyond it σ is 1, or
// under 1e-38).
func sigmoid16(x archsimd.Float32x16) archsimd.Float32x16 {
	one := archsimd.BroadcastFloat32x16(1)
	var zero archsimd.Float32x16
	e := exp16(zero.Sub(x).Max(archsimd.BroadcastFloat32x16(expFloor)).Min(archsimd.BroadcastFloat32x16(-expFloor)))
	return one.Div(one.Add(e))
}

// exp16 is exp(x) for x ≥ expFloor: x = n·ln 2 + r, exp(r) by the polynomial, scaled by 2ⁿ.
func exp16(x archsimd.Float32x16) archsimd.Float32x16 {
	n := x.Mul(archsimd.BroadcastFloat32x16(expLog2E)).RoundScaled(expRoundTo)
	r := n.MulAdd(archsimd.BroadcastFloat32x16(-expLn2Hi), x)
	r = n.MulAdd(archsimd.BroadcastFloat32x16(-expLn2Lo), r)
	p := archsimd.BroadcastFloat32x16(expC5).MulAdd(r, archsimd.BroadcastFloat32x16(expC4))
	p = p.MulAdd(r, archsimd.BroadcastFloat32x16(expC3))
	p = p.MulAdd(r, archsimd.BroadcastFloat32x16(expC2))
	p = p.MulAdd(r, archsimd.BroadcastFloat32x16(expC1))
	p = p.MulAdd(r, archsimd.BroadcastFloat32x16(expC0))
	p = p.MulAdd(r.Mul(r), r).Add(archsimd.BroadcastFloat32x16(1))
	return p.Scale(n)
}

// scaleAll multiplies each of sc by k, 16 at a time.
func scaleAll(sc []float32, k float32) {
	if !haveAVX512 || len(sc) < 16 {
		scalePlain(sc, k)
		return
	}
	v := len(sc) &^ 15
	kv := archsimd.BroadcastFloat32x16(k)
	for t := 0; t < v; t += 16 {
		archsimd.LoadFloat32x16(sc[t:]).Mul(kv).Store(sc[t:])
	}
	archsimd.ClearAVXUpperBits()
	scalePlain(sc[v:], k)
}

// roundAll rounds each of x to bfloat16's precision in place (round16x16), 16 at a time.
func roundAll(x []float32) {
	v := 0
	if haveAVX512 {
		v = len(x) &^ 15
		for t := 0; t < v; t += 16 {
			near16x16(archsimd.LoadFloat32x16(x[t:])).Store(x[t:])
		}
		archsimd.ClearAVXUpperBits()
	}
	roundPlain(x[v:])
}

// panels32Prefetched is panels32's AVX-512 kernel: each panel's 64 columns in four accumulators,
// the panels prefetched 8 KiB ahead (kernels_amd64.s).
func panels32Prefetched(w, x, y []float32, in int) {
	count := len(y) / kernelWidth
	if count == 0 || in == 0 {
		clear(y)
		return
	}
	_, _ = w[count*in*kernelWidth-1], x[in-1]
	panels32Asm(data(w), data(x), data(y), in, count)
}

// panels32Asm is panels32Prefetched's kernel (kernels_amd64.s).
//
//go:noescape
func panels32Asm(w, x, y unsafe.Pointer, in, count int)

// panels16Prefetched is panels16's AVX-512 kernel, the panels prefetched 4 KiB ahead. It widens
// two bfloat16 values a 32-bit word: the word shifted left 16 is the even column's float32, the
// word masked to its high half the odd one's, so 32 columns cost one load, one shift and one and
// (widening 16 at a time, with a zero-extension and a shift, read 0.89–0.96 of its bytes per
// second, alternated); even and odd columns accumulate apart and are interleaved once a panel.
// One panel at a time: two at once (two streams of loads) had made a decode step 1.08–1.11× as
// fast without prefetching.
func panels16Prefetched(w []uint16, x, y []float32, in int) {
	count := len(y) / kernelWidth
	if count == 0 || in == 0 {
		clear(y)
		return
	}
	_, _ = w[count*in*kernelWidth-1], x[in-1]
	var acc [8 * 4]archsimd.Float32x16 // eight panels at a time
	for q := 0; q < count; q += 8 {
		n := min(8, count-q)
		panels16Asm(unsafe.Pointer(&w[q*in*kernelWidth]), data(x), in, n, unsafe.Pointer(&acc[0]))
		for i := range n {
			interleave(y[(q+i)*kernelWidth:], acc[4*i], acc[4*i+1], acc[4*i+2], acc[4*i+3])
		}
	}
	archsimd.ClearAVXUpperBits()
}

// panels16Asm is panels16Prefetched's kernel (kernels_amd64.s).
//
//go:noescape
func panels16Asm(w, x unsafe.Pointer, in, count int, acc unsafe.Pointer)

// data is a pointer to s's first element, for the assembly kernels.
func data(s []float32) unsafe.Pointer { return unsafe.Pointer(unsafe.SliceData(s)) }

// contextPair32x128Asm is contextPair32's 128 columns from vb on, the rows rowBytes apart
// (kernels_amd64.s): one pass over each row, where contextPair32AVX512 makes two.
//
//go:noescape
func contextPair32x128Asm(vb, p0, p1 unsafe.Pointer, m, rowBytes int, c0, c1 unsafe.Pointer)

// scoresStripHalfAsm is scoresPairHalf's 64 slots from kt on (kernels_amd64.s).
//
//go:noescape
func scoresStripHalfAsm(kt, q0, q1 unsafe.Pointer, hd, stride int, s0, s1 unsafe.Pointer)

// scoresVecHalfAsm is scoresPairHalf's 16 slots from kt on (kernels_amd64.s).
//
//go:noescape
func scoresVecHalfAsm(kt, q0, q1 unsafe.Pointer, hd, stride int, s0, s1 unsafe.Pointer)

// scoresStrip16Asm is scoresPair16's 64 slots from kt on (kernels_amd64.s).
//
//go:noescape
func scoresStrip16Asm(kt, q0, q1 unsafe.Pointer, hd, stride int, s0, s1 unsafe.Pointer)

// scoresVec16Asm is scoresPair16's 16 slots from kt on (kernels_amd64.s).
//
//go:noescape
func scoresVec16Asm(kt, q0, q1 unsafe.Pointer, hd, stride int, s0, s1 unsafe.Pointer)

// contextPair16x128Asm is contextPair16's 128 columns from vb on, the rows rowBytes apart
// (kernels_amd64.s).
//
//go:noescape
func contextPair16x128Asm(vb, p0, p1 unsafe.Pointer, m, rowBytes int, c0, c1 unsafe.Pointer)

// contextPair16x16Asm is contextPair16's 16 columns from vb on (kernels_amd64.s).
//
//go:noescape
func contextPair16x16Asm(vb, p0, p1 unsafe.Pointer, m, rowBytes int, c0, c1 unsafe.Pointer)

// contextPairHalfx128Asm is contextPairHalf's 128 columns from vb on, the rows rowBytes apart
// (kernels_amd64.s).
//
//go:noescape
func contextPairHalfx128Asm(vb, p0, p1 unsafe.Pointer, m, rowBytes int, c0, c1 unsafe.Pointer)

// contextPairHalfx16Asm is contextPairHalf's 16 columns from vb on (kernels_amd64.s).
//
//go:noescape
func contextPairHalfx16Asm(vb, p0, p1 unsafe.Pointer, m, rowBytes int, c0, c1 unsafe.Pointer)

// scoresStrip32Asm is scoresPair32AVX512's 64 slots from kt on (kernels_amd64.s).
//
//go:noescape
func scoresStrip32Asm(kt, q0, q1 unsafe.Pointer, hd, stride int, s0, s1 unsafe.Pointer)

// panel4x32Asm is panel4x32's kernel (kernels_amd64.s): y_r[j] = Σ_k w[k·64+j]·x_r[k], in ≥ 0.
//
//go:noescape
func panel4x32Asm(w, x0, x1, x2, x3, y0, y1, y2, y3 unsafe.Pointer, in int)

// panel4x16Asm is panel4x16's kernel (kernels_amd64.s): acc[4r] and acc[4r+1] are row r's even
// and odd columns of the panel's first 32, acc[4r+2] and acc[4r+3] those of the next 32.
//
//go:noescape
func panel4x16Asm(w, x0, x1, x2, x3 unsafe.Pointer, in int, acc *[16]archsimd.Float32x16)

// rowPointers points at each of the rows x, for the eight-row kernels.
func rowPointers(x *[8][]float32) (ptrs [8]unsafe.Pointer) {
	for r := range x {
		ptrs[r] = data(x[r])
	}
	return ptrs
}

// panel8x32 is panel4x32 for eight rows, the panel read from memory once: in k's blocks of 8 KiB
// each block multiplied by rows 0–3, then by rows 4–7 from the level-1 cache, the panel
// prefetched to the level-2 cache 16 KiB ahead, half the lines by each four. Eight rows by a
// Qwen3-0.6B layer's weights (BenchmarkRowKernels, alternated on a 2-core Xeon) ran 1.21–1.35× as
// fast as two passes of four rows (the second from the level-2 cache); the prefetch's distance
// and level made most of it (in a throwaway harness, 8 KiB ahead or to level 1 took back half or
// more).
func panel8x32(w []float32, x, y *[8][]float32, in, width int) bool {
	if !groupRuns(x[:], y[:], in, width) {
		return false
	}
	w = w[:in*kernelWidth] // the slice checks the panel's length
	ptrs := rowPointers(x)
	var acc [8 * kernelWidth]float32
	panel8x32Asm(unsafe.Pointer(unsafe.SliceData(w)), &ptrs, unsafe.Pointer(&acc[0]), in)
	for r := range 8 {
		copy(y[r][:kernelWidth], acc[r*kernelWidth:])
	}
	return true
}

// panel8x16 is panel8x32 for a bfloat16 panel (its bits), widened in registers as panel4x16
// widens it.
func panel8x16(w []uint16, x, y *[8][]float32, in, width int) bool {
	if !groupRuns(x[:], y[:], in, width) {
		return false
	}
	w = w[:in*kernelWidth]
	ptrs := rowPointers(x)
	var acc [32]archsimd.Float32x16
	panel8x16Asm(unsafe.Pointer(unsafe.SliceData(w)), &ptrs, unsafe.Pointer(&acc[0]), in)
	for r := range 8 {
		interleave(y[r], acc[4*r], acc[4*r+1], acc[4*r+2], acc[4*r+3])
	}
	archsimd.ClearAVXUpperBits()
	return true
}

// panel8x32Asm is panel8x32's kernel (kernels_amd64.s): acc [8][64] (row r's at acc[64r:]).
//
//go:noescape
func panel8x32Asm(w unsafe.Pointer, x *[8]unsafe.Pointer, acc unsafe.Pointer, in int)

// panel8x16Asm is panel8x16's kernel (kernels_amd64.s): row r's accumulators at acc[4r:4r+4], in
// panel4x16Asm's order.
//
//go:noescape
func panel8x16Asm(w unsafe.Pointer, x *[8]unsafe.Pointer, acc unsafe.Pointer, in int)

// normScale writes w · (x · r) into out, 16 at a time (out may be x).
func normScale(x, w, out []float32, r float32) {
	if !haveAVX512 || len(x) < 16 {
		normScalePlain(x, w, out, r)
		return
	}
	v := len(x) &^ 15
	_, _ = w[v-1], out[v-1]
	rv := archsimd.BroadcastFloat32x16(r)
	for t := 0; t < v; t += 16 {
		archsimd.LoadFloat32x16(w[t:]).Mul(archsimd.LoadFloat32x16(x[t:]).Mul(rv)).Store(out[t:])
	}
	archsimd.ClearAVXUpperBits()
	normScalePlain(x[v:], w[v:], out[v:], r)
}

// rotateHalves writes x · cos + swap(x) · sin into out for one head (out may be x), both halves
// 16 at a time where half the width is a multiple of 16, each product rounded before the sum.
func rotateHalves(x, cos, sin, out []float32) {
	half := len(x) / 2
	if !haveAVX512 || half%16 != 0 {
		rotateHalvesPlain(x, cos, sin, out)
		return
	}
	_, _, _ = cos[2*half-1], sin[2*half-1], out[2*half-1]
	for t := 0; t < half; t += 16 {
		lo, hi := archsimd.LoadFloat32x16(x[t:]), archsimd.LoadFloat32x16(x[t+half:])
		a := lo.Mul(archsimd.LoadFloat32x16(cos[t:])).Add(hi.Mul(archsimd.LoadFloat32x16(sin[t:])))
		b := hi.Mul(archsimd.LoadFloat32x16(cos[t+half:])).Add(lo.Mul(archsimd.LoadFloat32x16(sin[t+half:])))
		a.Store(out[t:])
		b.Store(out[t+half:])
	}
	archsimd.ClearAVXUpperBits()
}

// round16x16 is x rounded to bfloat16 as bfloat16.FromFloat32 rounds it (to nearest, ties to
// even; NaN and ±∞ cut as they are), as float32 bits whose low halves are zero.
func round16x16(x archsimd.Float32x16) archsimd.Uint32x16 {
	bits := x.AsUint32x16()
	exponent := archsimd.BroadcastUint32x16(0x7F800000)
	odd := bits.ShiftAllRight(16).And(archsimd.BroadcastUint32x16(1))
	rounded := bits.Add(archsimd.BroadcastUint32x16(0x7FFF)).Add(odd)
	return bits.IfElse(bits.And(exponent).Equal(exponent), rounded).And(archsimd.BroadcastUint32x16(0xFFFF0000))
}

// near16x16 is x rounded to bfloat16 and widened back (round16 on 16 values).
func near16x16(x archsimd.Float32x16) archsimd.Float32x16 { return round16x16(x).AsFloat32x16() }

// store16x16 stores x rounded to bfloat16 (its bits) at p + off bytes.
func store16x16(p unsafe.Pointer, off int, x archsimd.Float32x16) {
	round16x16(x).ShiftAllRight(16).TruncToUint16().StoreArray((*[16]uint16)(unsafe.Add(p, off)))
}

// pointer16 is a pointer to s's first element, for the bfloat16 loops.
func pointer16(s []uint16) unsafe.Pointer { return unsafe.Pointer(unsafe.SliceData(s)) }

// narrowAll writes the float32 values src into dst rounded to bfloat16 (their bits), 16 at a
// time, len(src) ≤ len(dst).
func narrowAll(dst []uint16, src []float32) {
	v := 0
	if haveAVX512 {
		dst = dst[:len(src)]
		v = len(src) &^ 15
		p := pointer16(dst)
		for i := 0; i < v; i += 16 {
			store16x16(p, 2*i, archsimd.LoadFloat32x16(src[i:]))
		}
		archsimd.ClearAVXUpperBits()
	}
	narrowPlain(dst[v:], src[v:])
}

// add16 writes a + b rounded to bfloat16 into h (h may be a or b), 16 at a time.
func add16(a, b, h []uint16) {
	v := 0
	if haveAVX512 {
		b, h = b[:len(a)], h[:len(a)]
		v = len(a) &^ 15
		pa, pb, ph := pointer16(a), pointer16(b), pointer16(h)
		for i := 0; i < 2*v; i += 32 {
			store16x16(ph, i, load16x16(pa, i).Add(load16x16(pb, i)))
		}
		archsimd.ClearAVXUpperBits()
	}
	add16Plain(a[v:], b[v:], h[v:])
}

// normScale16 writes w · round16(x · r), rounded to bfloat16, into out (out may be x), 16 at a
// time.
func normScale16(x, w, out []uint16, r float32) {
	v := 0
	if haveAVX512 {
		w, out = w[:len(x)], out[:len(x)]
		v = len(x) &^ 15
		px, pw, po := pointer16(x), pointer16(w), pointer16(out)
		rv := archsimd.BroadcastFloat32x16(r)
		for i := 0; i < 2*v; i += 32 {
			store16x16(po, i, load16x16(pw, i).Mul(near16x16(load16x16(px, i).Mul(rv))))
		}
		archsimd.ClearAVXUpperBits()
	}
	normScale16Plain(x[v:], w[v:], out[v:], r)
}

// rotateHalves16 is rotateHalves for a bfloat16 head and tables (their bits): each product
// rounded to bfloat16, then their sum, as compute rounds each operation.
func rotateHalves16(x, cos, sin, out []uint16) {
	half := len(x) / 2
	if !haveAVX512 || half%16 != 0 {
		rotateHalves16Plain(x, cos, sin, out)
		return
	}
	_, _, _ = cos[2*half-1], sin[2*half-1], out[2*half-1]
	px, pc, ps, po := pointer16(x), pointer16(cos), pointer16(sin), pointer16(out)
	for t := 0; t < 2*half; t += 32 {
		lo, hi := load16x16(px, t), load16x16(px, t+2*half)
		a := near16x16(lo.Mul(load16x16(pc, t))).Add(near16x16(hi.Mul(load16x16(ps, t))))
		b := near16x16(hi.Mul(load16x16(pc, t+2*half))).Add(near16x16(lo.Mul(load16x16(ps, t+2*half))))
		store16x16(po, t, a)
		store16x16(po, t+2*half, b)
	}
	archsimd.ClearAVXUpperBits()
}

// siluMul16 writes round16(gate · round16(σ(gate))) · up, rounded to bfloat16, into y (y may
// be gate), 16 at a time (sigmoid16).
func siluMul16(gate, up, y []uint16) {
	v := 0
	if haveAVX512 {
		up, y = up[:len(gate)], y[:len(gate)]
		v = len(gate) &^ 15
		pg, pu, py := pointer16(gate), pointer16(up), pointer16(y)
		for i := 0; i < 2*v; i += 32 {
			g := load16x16(pg, i)
			silu := near16x16(g.Mul(near16x16(sigmoid16(g))))
			store16x16(py, i, silu.Mul(load16x16(pu, i)))
		}
		archsimd.ClearAVXUpperBits()
	}
	siluMul16Plain(gate[v:], up[v:], y[v:])
}

// narrowHalfAsm rounds n float32 values (a multiple of 16) at src to float16 at dst
// (kernels_amd64.s), reporting whether any was a NaN.
//
//go:noescape
func narrowHalfAsm(dst, src unsafe.Pointer, n int) (nan bool)

// narrowHalf writes the float32 values src into dst rounded to float16 (their bits), as compute
// rounds them (float16.FromFloat32: to nearest, ties to even): a float16 KV cache's keys and
// values, 2,048 values a layer of a Qwen3-0.6B decode step.
func narrowHalf(dst []uint16, src []float32) { convertHalves(dst, src, narrowHalfAsm, narrowHalfPlain) }

// widenHalfAsm widens n float16 values (a multiple of 16) at src to float32 at dst
// (kernels_amd64.s), reporting whether any was a NaN.
//
//go:noescape
func widenHalfAsm(dst, src unsafe.Pointer, n int) (nan bool)

// widenHalfAll writes the float16 values src (their bits) into dst as float32, exactly, as
// compute widens them: a prompt's keys and values read back as a float16 cache holds them
// (262,144 values a layer for 128 tokens of Qwen3-0.6B).
func widenHalfAll(dst []float32, src []uint16) { convertHalves(dst, src, widenHalfAsm, widenHalfPlain) }

// convertHalves converts src into dst 16 values at a time with the vector kernel vec where this
// CPU has the kernels, and the rest with plain; all of it with plain where vec reports a NaN
// among the values, whose bits the instructions set otherwise than compute does.
func convertHalves[D, S any](dst []D, src []S, vec func(dst, src unsafe.Pointer, n int) (nan bool), plain func([]D, []S)) {
	dst = dst[:len(src)]
	v := 0
	if haveAVX512 {
		v = len(src) &^ 15
		if v > 0 && vec(unsafe.Pointer(unsafe.SliceData(dst)), unsafe.Pointer(unsafe.SliceData(src)), v) {
			v = 0
		}
	}
	plain(dst[v:], src[v:])
}

// rowsFrom is the fewest attended slots of a key block that byRows scores by rows. At depth
// 4,096 (blocks of 512 slots) a Qwen3-0.6B decode step's attention took 22.9–24.0 ms by rows
// against 27.3–30.3 by strips (float32 weights, float16 cache) and 21.2–23.3 against 26.3–29.3
// (bfloat16), alternated in one process on a 2-core AMD EPYC (Zen 4). After a 512-token prompt
// (blocks up to 256 slots) the two took the same, and after 128 tokens by rows took 1.16× as long:
// a small block's strips are then in the caches, and the sums' loads and stores cost more than
// they save. A variable for the tests.
var rowsFrom = 256

// byRows says whether a key block of hd rows, m of its slots attended, is scored by rows
// (scoresPairRows) rather than by strips. A strip walks 64 slots down all hd rows: 128 streams
// of 128 or 256 bytes each, the rows 1 or 2 KiB apart in a block of 512 slots, which the
// hardware's prefetchers do not follow and the L1 cannot hold (every 4 KiB of the block maps to
// the same sets). One core scored such blocks from memory at 7.1–8.9 GB/s by strips where the
// value rows' context ran at 18.2–23.9, and at 18.3–18.7 by rows (BenchmarkKeyWalks).
func byRows(hd, m int) bool { return hd%2 == 0 && m >= rowsFrom }

// rowsKernel is a key kernel that walks a block by its rows (kernels_amd64.s): it adds to s0 and
// s1 [0, m) (m a multiple of 16) the products of query rows q0 and q1 [hd] (hd even) by the
// block kt's slots [0, m), its rows stride bytes apart.
type rowsKernel func(kt, q0, q1 unsafe.Pointer, hd, stride, m int, s0, s1 unsafe.Pointer)

// scoresPairRows stores in s0 and s1 [0, m) the scores of a key block at p by rows: each sum over
// d in order, as a strip's, so the same to the bit.
func scoresPairRows(p unsafe.Pointer, q0, q1 []float32, hd, stride, m int, s0, s1 []float32, rows rowsKernel) {
	s0, s1 = s0[:m], s1[:m]
	clear(s0)
	clear(s1)
	rows(p, data(q0), data(q1[:hd]), hd, stride, m, data(s0), data(s1))
}

// scoresRowsHalfAsm is the rowsKernel for float16 keys (kernels_amd64.s).
//
//go:noescape
func scoresRowsHalfAsm(kt, q0, q1 unsafe.Pointer, hd, stride, m int, s0, s1 unsafe.Pointer)

// scoresRows16Asm is the rowsKernel for bfloat16 keys (kernels_amd64.s).
//
//go:noescape
func scoresRows16Asm(kt, q0, q1 unsafe.Pointer, hd, stride, m int, s0, s1 unsafe.Pointer)

// scoresRows32Asm is the rowsKernel for float32 keys (kernels_amd64.s).
//
//go:noescape
func scoresRows32Asm(kt, q0, q1 unsafe.Pointer, hd, stride, m int, s0, s1 unsafe.Pointer)
