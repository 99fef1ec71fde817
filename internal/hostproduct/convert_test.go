package hostproduct

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/dtypes/bfloat16"
	"github.com/gomlx/compute/dtypes/float16"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // the graph DSL reads best unqualified
	"github.com/gomlx/gomlx/core/tensors"
)

// specialBits are float32 bit patterns where rounding to bfloat16 is easy to get wrong: zeros,
// ties to even both ways, subnormals, the largest finite value (which rounds to ∞), infinities
// and NaNs.
var specialBits = []uint32{
	0x00000000, 0x80000000, 0x3F800000, 0x3F808000, 0x3F818000, 0x3F807FFF, 0x3F808001,
	0x00000001, 0x00008000, 0x00018000, 0x807FFFFF, 0x00800000, 0x7F7FFFFF, 0xFF7F8000,
	0x7F800000, 0xFF800000, 0x7FC00000, 0x7F800001, 0xFFFFFFFF, 0x7FBFFFFF,
}

// halfBits are float32 bit patterns where rounding to float16 is easy to get wrong: ties to even
// both ways (1 + 2⁻¹¹, 1 + 3·2⁻¹¹), the largest finite float16 (65504), the first value that
// rounds to ∞ (65520) and one just below it, the smallest normal (2⁻¹⁴) and subnormal (2⁻²⁴),
// half of it (a tie to zero) and a little more.
var halfBits = []uint32{0x3F801000, 0x3F803000, 0x477FE000, 0x477FF000, 0x477FEFFF, 0x38800000,
	0x33800000, 0x33000000, 0x33000001, 0xC77FF000}

// noNaN is bits with each NaN pattern replaced by ±∞ (a conversion's vector loop runs only on
// values without NaNs).
func noNaN(bits []uint32) []uint32 {
	out := make([]uint32, len(bits))
	for i, b := range bits {
		if b&0x7F800000 == 0x7F800000 && b&0x7FFFFF != 0 {
			b &^= 0x7FFFFF
		}
		out[i] = b
	}
	return out
}

// bitsTensor is values of dtype from 32-bit patterns (cut to their high half for bfloat16, their
// low half for float16).
func bitsTensor(bits []uint32, dtype dtypes.DType) *tensors.Tensor {
	if dtype == dtypes.Float16 {
		h := make([]float16.Float16, len(bits))
		for i, b := range bits {
			h[i] = float16.Float16(b)
		}
		return tensors.FromFlatDataAndDimensions(h, len(h))
	}
	if dtype == dtypes.Float32 {
		f := make([]float32, len(bits))
		for i, b := range bits {
			f[i] = math.Float32frombits(b)
		}
		return tensors.FromFlatDataAndDimensions(f, len(f))
	}
	h := make([]bfloat16.BFloat16, len(bits))
	for i, b := range bits {
		h[i] = bfloat16.BFloat16(b >> 16)
	}
	return tensors.FromFlatDataAndDimensions(h, len(h))
}

// tensorBits is a float32, bfloat16 or float16 tensor's values as 32-bit patterns (bfloat16's in
// the high half, float16's in the low).
func tensorBits(t *testing.T, x *tensors.Tensor) []uint32 {
	t.Helper()
	var out []uint32
	switch x.DType() {
	case dtypes.Float32:
		tensors.MustConstFlatData(x, func(f []float32) {
			for _, v := range f {
				out = append(out, math.Float32bits(v))
			}
		})
	case dtypes.BFloat16:
		tensors.MustConstFlatData(x, func(f []bfloat16.BFloat16) {
			for _, v := range f {
				out = append(out, uint32(v)<<16)
			}
		})
	case dtypes.Float16:
		tensors.MustConstFlatData(x, func(f []float16.Float16) {
			for _, v := range f {
				out = append(out, uint32(v))
			}
		})
	default:
		t.Fatalf("a tensor of %s", x.DType())
	}
	return out
}

// TestConvertsBetweenPieces converts a parameter between float32 and bfloat16, and from float32 to
// float16, on the wrapped backend and on the backend itself: in Go, bit for bit as compute
// converts (special values, a few values and enough to be shared out, every bfloat16 pattern
// widened), and on compute where
// a piece is being built or the dtype is not a float the calls take.
func TestConvertsBetweenPieces(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	random := func(n int) []uint32 {
		bits := append([]uint32{}, specialBits...)
		for len(bits) < n {
			bits = append(bits, r.Uint32())
		}
		return bits
	}
	every16 := make([]uint32, 1<<16)
	for i := range every16 {
		every16[i] = uint32(i) << 16
	}
	everyHalf, halfNoNaN := make([]uint32, 1<<16), []uint32{}
	for i := range everyHalf {
		everyHalf[i] = uint32(i)
		if i&0x7C00 != 0x7C00 || i&0x3FF == 0 {
			halfNoNaN = append(halfNoNaN, uint32(i))
		}
	}
	for _, tc := range []struct {
		name     string
		from, to dtypes.DType
		bits     []uint32
		form     string // "slot", "piece" (after a negation) or "int"
		inGo     int64
	}{
		{"f32-bf16/few", dtypes.Float32, dtypes.BFloat16, random(21), "slot", 1},
		{"f32-bf16/shared", dtypes.Float32, dtypes.BFloat16, random(40_003), "slot", 1}, // three chunks
		{"bf16-f32/every", dtypes.BFloat16, dtypes.Float32, every16, "slot", 1},
		{"f32-f16/few", dtypes.Float32, dtypes.Float16, append(random(21), halfBits...), "slot", 1},
		{"f32-f16/shared", dtypes.Float32, dtypes.Float16, random(40_003), "slot", 1},
		{"f32-f16/no-nan", dtypes.Float32, dtypes.Float16, noNaN(append(random(40_003), halfBits...)), "slot", 1}, // the vector loop whole
		{"f32-f16/piece", dtypes.Float32, dtypes.Float16, random(40), "piece", 0},
		{"f16-f32/every", dtypes.Float16, dtypes.Float32, everyHalf, "slot", 1},
		{"f16-f32/no-nan", dtypes.Float16, dtypes.Float32, halfNoNaN, "slot", 1}, // the vector loop whole
		{"f32-bf16/piece", dtypes.Float32, dtypes.BFloat16, random(40), "piece", 0},
		{"bf16-f32/piece", dtypes.BFloat16, dtypes.Float32, random(40), "piece", 0},
		{"f32-int", dtypes.Float32, dtypes.Int32, []uint32{0x3F800000, 0xC0400000}, "int", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inner, wrapped := newBackends(t, 1024)
			run := func(b compute.Backend) *tensors.Tensor {
				exec, err := NewExec(b, func(x *Node) *Node {
					if tc.form == "piece" {
						x = Neg(x)
					}
					y := ConvertDType(x, tc.to)
					if tc.form == "int" {
						y = ConvertDType(y, dtypes.Float32)
					}
					return y
				})
				if err != nil {
					t.Fatal(err)
				}
				defer exec.Finalize()
				out, err := exec.Call(bitsTensor(tc.bits, tc.from))
				if err != nil {
					t.Fatal(err)
				}
				return out[0]
			}
			want, got := tensorBits(t, run(inner)), tensorBits(t, run(wrapped))
			if n := wrapped.ConvertsRun(); n != tc.inGo {
				t.Errorf("%d conversions ran in Go, want %d", n, tc.inGo)
			}
			if len(got) != len(want) {
				t.Fatalf("%d values, the backend's %d", len(got), len(want))
			}
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("value %d (%#08x) converted to %#08x, the backend's %#08x", i, tc.bits[i], got[i], want[i])
				}
			}
		})
	}
}

// TestHalfKernels checks the bfloat16 loops against their plain definitions, bit for bit, on
// lengths around the vectors' 16 values and on special values: narrowAll, add16, normScale16
// and rotateHalves16 (heads of 16 to 256 values); siluMul16 within one bfloat16 step, its
// vector σ being a float32 polynomial a few float32 ulps from math.Exp's.
func TestHalfKernels(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	values := func(n int, special bool) ([]float32, []uint16) {
		f := make([]float32, n)
		h := make([]uint16, n)
		for i := range f {
			f[i] = float32(r.NormFloat64() * 3)
			if special && i%5 == 0 {
				f[i] = math.Float32frombits(specialBits[(i/5)%len(specialBits)])
			}
			h[i] = bits16(f[i])
		}
		return f, h
	}
	same := func(what string, n int, got, want []uint16) {
		t.Helper()
		for i := range want {
			if got[i] != want[i] && !(isNaN16(got[i]) && isNaN16(want[i])) {
				t.Fatalf("%s, %d values: value %d is %#04x, the plain loop's %#04x", what, n, i, got[i], want[i])
			}
		}
	}
	for _, n := range []int{0, 1, 15, 16, 17, 31, 32, 33, 64, 130, 1024} {
		f, _ := values(n, true)
		got, want := make([]uint16, n), make([]uint16, n)
		narrowAll(got, f)
		narrowPlain(want, f)
		same("narrowAll", n, got, want)

		_, a := values(n, true)
		_, b := values(n, true)
		add16(a, b, got)
		add16Plain(a, b, want)
		same("add16", n, got, want)

		_, w := values(n, false)
		normScale16(a, w, got, 0.37)
		normScale16Plain(a, w, want, 0.37)
		same("normScale16", n, got, want)

		_, g := values(n, false)
		siluMul16(g, b, got)
		siluMul16Plain(g, b, want)
		for i := range want {
			if d := math.Abs(float64(widen16(got[i]) - widen16(want[i]))); d > math.Abs(float64(widen16(want[i])))/64 && !isNaN16(want[i]) {
				t.Fatalf("siluMul16, %d values: value %d is %v, the plain loop's %v", n, i, widen16(got[i]), widen16(want[i]))
			}
		}
	}
	for _, hd := range []int{16, 32, 64, 128, 256} {
		_, x := values(hd, true)
		_, cos := values(hd, false)
		_, sin := values(hd, false)
		got, want := make([]uint16, hd), make([]uint16, hd)
		rotateHalves16(x, cos, sin, got)
		rotateHalves16Plain(x, cos, sin, want)
		same("rotateHalves16", hd, got, want)
		rotateHalves16(x, cos, sin, x) // in place
		same("rotateHalves16 in place", hd, x, want)
	}
}

// isNaN16 says whether a bfloat16's bits are a NaN.
func isNaN16(h uint16) bool { return h&0x7F80 == 0x7F80 && h&0x7F != 0 }
