//go:build goexperiment.simd && amd64

package train

import "simd/archsimd"

var haveAVX2 = archsimd.X86.AVX2()

// adamwVector is Update's loop four values at a time in float64 AVX lanes, each operation the
// scalar loop's, in its order and rounded as it rounds (Go does not fuse the scalar loop's
// multiply-adds on amd64, nor does this), so the results are the same bits. It returns how many
// leading values it updated (a multiple of 4; 0 without AVX2).
func adamwVector(param, grad, expAvg, expAvgSq []float32, c adamwConsts) int {
	if !haveAVX2 {
		return 0
	}
	n := len(grad) &^ 3
	param, expAvg, expAvgSq = param[:n], expAvg[:n], expAvgSq[:n]
	decay, w, oneMinusW := archsimd.BroadcastFloat64x4(c.decay), archsimd.BroadcastFloat64x4(c.w), archsimd.BroadcastFloat64x4(1-c.w)
	beta2, oneMinusBeta2 := archsimd.BroadcastFloat64x4(c.beta2), archsimd.BroadcastFloat64x4(c.oneMinusBeta2)
	bc2sqrt, eps, stepSize := archsimd.BroadcastFloat64x4(c.bc2sqrt), archsimd.BroadcastFloat64x4(c.eps), archsimd.BroadcastFloat64x4(c.stepSize)
	lerpUp := c.w < 0.5
	for i := 0; i < n; i += 4 {
		g := archsimd.LoadFloat32x4(grad[i:]).ConvertToFloat64()
		p := archsimd.LoadFloat32x4(param[i:]).ConvertToFloat64().Mul(decay)
		a := archsimd.LoadFloat32x4(expAvg[i:]).ConvertToFloat64()
		if lerpUp {
			a = a.Add(w.Mul(g.Sub(a)))
		} else {
			a = g.Sub(g.Sub(a).Mul(oneMinusW))
		}
		v := archsimd.LoadFloat32x4(expAvgSq[i:]).ConvertToFloat64().Mul(beta2).Add(oneMinusBeta2.Mul(g).Mul(g))
		a32, v32 := a.ConvertToFloat32(), v.ConvertToFloat32()
		a32.Store(expAvg[i:])
		v32.Store(expAvgSq[i:])
		denom := v32.ConvertToFloat64().Sqrt().Div(bc2sqrt).Add(eps)
		p.Sub(stepSize.Mul(a32.ConvertToFloat64()).Div(denom)).ConvertToFloat32().Store(param[i:])
	}
	return n
}
