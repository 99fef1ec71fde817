//go:build goexperiment.simd && amd64

package logitscan

import (
	"math/bits"
	"simd/archsimd"
	"slices"
)

var haveAVX512 = archsimd.X86.AVX512()

// Argmax is the index of the largest value of x, the first one on ties (like torch.argmax); a NaN
// is never larger than another value, and x[0] is the answer when it is a NaN. 0 for an empty x.
// On AVX-512 it finds the largest value 16 at a time, then the first place that holds it; a row
// with a NaN goes value by value.
func Argmax(x []float32) int {
	if !haveAVX512 || len(x) < 32 {
		return argmaxPlain(x)
	}
	defer archsimd.ClearAVXUpperBits()
	v := len(x) &^ 15
	highest := archsimd.LoadFloat32x16(x)
	nan := highest.IsNaN()
	for i := 16; i < v; i += 16 {
		y := archsimd.LoadFloat32x16(x[i:])
		nan = nan.Or(y.IsNaN())
		highest = highest.Max(y)
	}
	if nan.ToBits() != 0 || slices.ContainsFunc(x[v:], func(t float32) bool { return t != t }) {
		return argmaxPlain(x)
	}
	var lanes [16]float32
	highest.StoreArray(&lanes)
	top := slices.Max(lanes[:])
	for _, t := range x[v:] {
		top = max(top, t)
	}
	want := archsimd.BroadcastFloat32x16(top)
	for i := 0; i < v; i += 16 {
		if found := archsimd.LoadFloat32x16(x[i:]).Equal(want).ToBits(); found != 0 {
			return i + bits.TrailingZeros16(found)
		}
	}
	return v + slices.Index(x[v:], top)
}

// FirstNonFinite is the index of the first NaN or ±Inf in x, or −1 where there is none; on
// AVX-512, 16 values at a time.
func FirstNonFinite(x []float32) int {
	if !haveAVX512 || len(x) < 16 {
		return firstNonFinitePlain(x)
	}
	defer archsimd.ClearAVXUpperBits()
	v := len(x) &^ 15
	for i := 0; i < v; i += 16 {
		y := archsimd.LoadFloat32x16(x[i:])
		if found := y.Sub(y).IsNaN().ToBits(); found != 0 { // x − x is NaN for NaN and ±Inf
			return i + bits.TrailingZeros16(found)
		}
	}
	if i := firstNonFinitePlain(x[v:]); i >= 0 {
		return v + i
	}
	return -1
}
