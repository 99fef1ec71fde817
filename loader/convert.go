package loader

import "math"

// BFloat16ToFloat32 widens a bfloat16 bit pattern to float32 (exact).
func BFloat16ToFloat32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// Float32ToBFloat16 narrows f to bfloat16 with round-to-nearest-even, the rounding PyTorch
// uses. NaNs stay NaN (quieted, sign kept); overflow rounds to ±Inf.
func Float32ToBFloat16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return uint16(b>>16) | 0x0040
	}
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}

// Float16ToFloat32 widens an IEEE 754 half-precision bit pattern to float32 (exact,
// subnormals, infinities and NaN payloads included).
func Float16ToFloat32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h & 0x3ff)
	switch {
	case exp == 0x1f: // Inf or NaN
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	case exp != 0: // normal
		return math.Float32frombits(sign | (exp+112)<<23 | mant<<13)
	case mant == 0: // ±0
		return math.Float32frombits(sign)
	}
	// subnormal: normalise
	e := uint32(113)
	for mant&0x400 == 0 {
		mant <<= 1
		e--
	}
	return math.Float32frombits(sign | e<<23 | (mant&0x3ff)<<13)
}

// Float32ToFloat16 narrows f to IEEE 754 half precision with round-to-nearest-even;
// overflow gives ±Inf, NaN stays NaN.
func Float32ToFloat16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23) & 0xff
	mant := b & 0x7fffff
	if exp == 0xff {
		if mant != 0 {
			return sign | 0x7e00 | uint16(mant>>13)
		}
		return sign | 0x7c00
	}
	e := exp - 127 + 15
	if e >= 0x1f {
		return sign | 0x7c00
	}
	if e <= 0 {
		if e < -10 {
			return sign // rounds to zero
		}
		m := mant | 0x800000
		shift := uint32(14 - e)
		half := uint32(1) << (shift - 1)
		rest := m & (1<<shift - 1)
		r := m >> shift
		if rest > half || (rest == half && r&1 == 1) {
			r++
		}
		return sign | uint16(r)
	}
	r := uint32(e)<<10 | mant>>13
	rest := mant & 0x1fff
	if rest > 0x1000 || (rest == 0x1000 && r&1 == 1) {
		r++ // may carry into the exponent, up to Inf: correct
	}
	return sign | uint16(r)
}

// Float8E5M2ToFloat32 widens an F8_E5M2 (bias 15, IEEE-like with Inf and NaN) bit pattern to
// float32; it is the top byte of a float16.
func Float8E5M2ToFloat32(v uint8) float32 { return Float16ToFloat32(uint16(v) << 8) }

// f8e4m3Table widens an F8_E4M3 (the "fn" variant: bias 7, no infinities, NaN is S.1111.111)
// bit pattern to float32.
var f8e4m3Table = func() (t [256]float32) {
	for i := range t {
		sign := float32(1)
		if i&0x80 != 0 {
			sign = -1
		}
		exp := (i >> 3) & 0xf
		mant := i & 7
		switch {
		case exp == 0xf && mant == 7:
			t[i] = float32(math.NaN())
		case exp == 0:
			t[i] = sign * float32(mant) / 8 * float32(math.Ldexp(1, -6))
		default:
			t[i] = sign * (1 + float32(mant)/8) * float32(math.Ldexp(1, exp-7))
		}
	}
	return t
}()
