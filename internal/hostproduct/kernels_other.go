//go:build !goexperiment.simd || !amd64

package hostproduct

// panels32 is x [in] times the float32 panels w [len(y)/width, in, width] (plain Go here).
func panels32(w, x, y []float32, in, width int) { panelsScalar(w, x, y, in, width) }

// panels16 is panels32 for bfloat16 panels (their bits).
func panels16(w []uint16, x, y []float32, in, width int) { panelsScalar16(w, x, y, in, width) }

// panel4x32 would multiply four rows by one float32 panel at once: false, as this build has no
// such kernel (the caller multiplies them one at a time).
func panel4x32(w []float32, x, y *[4][]float32, in, width int) bool { return false }

// panel4x16 is panel4x32 for a bfloat16 panel: false here too.
func panel4x16(w []uint16, x, y *[4][]float32, in, width int) bool { return false }

// panel8x32 would multiply eight rows by one float32 panel at once: false here.
func panel8x32(w []float32, x, y *[8][]float32, in, width int) bool { return false }

// panel8x16 is panel8x32 for a bfloat16 panel: false here too.
func panel8x16(w []uint16, x, y *[8][]float32, in, width int) bool { return false }

// siluMul writes (gate·σ(gate))·up into y (plain Go here).
func siluMul(gate, up, y []float32) { siluMulPlain(gate, up, y) }

// widenAll writes the bfloat16 values src (their bits) into dst as float32, len(src) ≤ len(dst).
func widenAll(dst []float32, src []uint16) { widenPlain(dst, src) }

// biasMax adds bias to sc and returns the largest sum (plain Go here).
func biasMax(sc, bias []float32) float32 { return biasMaxPlain(sc, bias) }

// expSum replaces each of sc by exp(sc − highest) and returns their sum (plain Go here).
func expSum(sc []float32, highest float32) float32 { return expSumPlain(sc, highest) }

// scaleAll multiplies each of sc by k (plain Go here).
func scaleAll(sc []float32, k float32) { scalePlain(sc, k) }

// roundAll rounds each of x to bfloat16's precision in place (plain Go here).
func roundAll(x []float32) { roundPlain(x) }

// kernelWidth is the panel width the vector kernels take elsewhere.
const kernelWidth = 64

// kernelVariant is one vector kernel pair, for the tests: none here.
type kernelVariant struct {
	name string
	f32  func(w, x, y []float32, in int)
	bf16 func(w []uint16, x, y []float32, in int)
}

// kernelVariants are the vector kernels this build can run: none.
func kernelVariants() []kernelVariant { return nil }

// vectorKernels says whether the AVX-512 kernels (attention's, the four-row products) run here:
// not in this build.
func vectorKernels() bool { return false }

// scoresPair32 stores in s0 and s1 [0, m) the products of query rows q0 and q1 [hd] by the
// columns [0, m) of a transposed key block kt (hd rows of n slots) (plain Go here).
func scoresPair32(q0, q1, kt []float32, n, m int, s0, s1 []float32) {
	scoresPairPlain(q0, q1, kt, n, 0, m, s0, s1, func(x float32) float32 { return x })
}

// scoresPair16 is scoresPair32 for a bfloat16 key block (its bits).
func scoresPair16(q0, q1 []float32, kt []uint16, n, m int, s0, s1 []float32) {
	scoresPairPlain(q0, q1, kt, n, 0, m, s0, s1, widen16)
}

// scoresPairHalf is scoresPair32 for a float16 key block (its bits; plain Go here).
func scoresPairHalf(q0, q1 []float32, kt []uint16, n, m int, s0, s1 []float32) {
	scoresPairPlain(q0, q1, kt, n, 0, m, s0, s1, widenHalf)
}

// contextPair32 adds to c0 and c1 [hd] the value rows vb [m, hd] weighted by p0 and p1 [m]
// (plain Go here).
func contextPair32(p0, p1, vb []float32, hd, m int, c0, c1 []float32) {
	contextPairPlain(p0, p1, vb, hd, m, c0, c1, func(x float32) float32 { return x })
}

// contextPair16 is contextPair32 for bfloat16 value rows (their bits).
func contextPair16(p0, p1 []float32, vb []uint16, hd, m int, c0, c1 []float32) {
	contextPairPlain(p0, p1, vb, hd, m, c0, c1, widen16)
}

// contextPairHalf is contextPair32 for float16 value rows (their bits; plain Go here).
func contextPairHalf(p0, p1 []float32, vb []uint16, hd, m int, c0, c1 []float32) {
	contextPairPlain(p0, p1, vb, hd, m, c0, c1, widenHalf)
}

// normScale writes w · (x · r) into out (plain Go here).
func normScale(x, w, out []float32, r float32) { normScalePlain(x, w, out, r) }

// rotateHalves writes x · cos + swap(x) · sin into out for one head (plain Go here).
func rotateHalves(x, cos, sin, out []float32) { rotateHalvesPlain(x, cos, sin, out) }

// narrowAll writes the float32 values src into dst rounded to bfloat16 (plain Go here).
func narrowAll(dst []uint16, src []float32) { narrowPlain(dst, src) }

// add16 writes a + b rounded to bfloat16 into h (plain Go here).
func add16(a, b, h []uint16) { add16Plain(a, b, h) }

// normScale16 writes w · round16(x · r), rounded to bfloat16, into out (plain Go here).
func normScale16(x, w, out []uint16, r float32) { normScale16Plain(x, w, out, r) }

// rotateHalves16 is rotateHalves for a bfloat16 head and tables (plain Go here).
func rotateHalves16(x, cos, sin, out []uint16) { rotateHalves16Plain(x, cos, sin, out) }

// siluMul16 writes round16(gate · round16(σ(gate))) · up, rounded to bfloat16, into y (plain Go
// here).
func siluMul16(gate, up, y []uint16) { siluMul16Plain(gate, up, y) }

// narrowHalf writes the float32 values src into dst rounded to float16 (plain Go here).
func narrowHalf(dst []uint16, src []float32) { narrowHalfPlain(dst, src) }

// widenHalfAll writes the float16 values src into dst as float32 (plain Go here).
func widenHalfAll(dst []float32, src []uint16) { widenHalfPlain(dst, src) }

// dotKernels says whether VDPBF16PS multiplies bfloat16 rows: not in this build.
func dotKernels() bool { return false }

// panel8dp multiplies eight bfloat16 rows by a bfloat16 panel as VDPBF16PS sums (plain Go here).
func panel8dp(w []uint16, x *[8][]uint16, y *[8][]float32, in int) { panel8dpPlain(w, x, y, in) }
