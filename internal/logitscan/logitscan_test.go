package logitscan

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
)

var (
	inf = float32(math.Inf(1))
	nan = float32(math.NaN())
	neg = float32(math.Copysign(0, -1))
)

// row is n values from a seeded generator, with the given values set at the given places.
func row(n int, seed uint64, set map[int]float32) []float32 {
	r := rand.New(rand.NewPCG(seed, 1))
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64() * 4)
	}
	for i, v := range set {
		x[i] = v
	}
	return x
}

// filled is n copies of v, with the given values set at the given places.
func filled(n int, v float32, set map[int]float32) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = v
	}
	for i, w := range set {
		x[i] = w
	}
	return x
}

func TestArgmax(t *testing.T) {
	for _, tc := range []struct {
		name string
		x    []float32
		want int
	}{
		{"empty", nil, 0},
		{"one", []float32{-3}, 0},
		{"largest in the vectors", row(1000, 1, map[int]float32{517: 99}), 517},
		{"largest in the tail", row(1000, 2, map[int]float32{997: 99}), 997},
		{"largest first", row(1000, 3, map[int]float32{0: 99}), 0},
		{"ties: the first", row(1000, 4, map[int]float32{40: 99, 41: 99, 900: 99}), 40},
		{"a tie between a vector and the tail", row(1000, 5, map[int]float32{33: 99, 999: 99}), 33},
		{"+Inf", row(1000, 6, map[int]float32{700: inf, 701: inf}), 700},
		{"zeros", make([]float32, 40), 0},
		{"-0 ties +0", filled(40, -1, map[int]float32{20: neg, 30: 0}), 20},
		{"+0 ties -0", filled(40, -1, map[int]float32{20: 0, 30: neg}), 20},
		{"a NaN is never larger", row(1000, 8, map[int]float32{3: nan, 600: 99}), 600},
		{"a NaN first wins", row(1000, 9, map[int]float32{0: nan, 600: 99}), 0},
		{"a NaN in the tail", row(1000, 10, map[int]float32{998: nan, 12: 99}), 12},
		{"all -Inf", filled(64, -inf, nil), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Argmax(tc.x); got != tc.want {
				t.Errorf("Argmax = %d, want %d", got, tc.want)
			}
			if got := argmaxPlain(tc.x); got != tc.want {
				t.Errorf("argmaxPlain = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestFirstNonFinite(t *testing.T) {
	for _, tc := range []struct {
		name string
		x    []float32
		want int
	}{
		{"empty", nil, -1},
		{"finite", row(1000, 1, map[int]float32{5: math.MaxFloat32, 6: -math.MaxFloat32, 7: 1e-45}), -1},
		{"NaN in the vectors", row(1000, 2, map[int]float32{321: nan, 500: inf}), 321},
		{"+Inf first", row(1000, 3, map[int]float32{17: inf, 18: nan}), 17},
		{"-Inf in the tail", row(1000, 4, map[int]float32{995: -inf}), 995},
		{"short", []float32{1, 2, nan}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := FirstNonFinite(tc.x); got != tc.want {
				t.Errorf("FirstNonFinite = %d, want %d", got, tc.want)
			}
		})
	}
}

// TestVectorsMatchThePlainLoops compares both scans with their plain loops on every length up to
// 100 and on rows with a few repeated values, NaNs and infinities sprinkled in.
func TestVectorsMatchThePlainLoops(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	special := []float32{nan, inf, -inf, 0, neg, 5, 5}
	for n := range 100 {
		for trial := range 20 {
			x := row(n, uint64(n*100+trial), nil)
			for range r.IntN(3) {
				if n > 0 {
					x[r.IntN(n)] = special[r.IntN(len(special))]
				}
			}
			checkScans(t, x)
		}
	}
}

// FuzzScans checks both scans against their plain loops on rows made of the fuzzer's bytes.
func FuzzScans(f *testing.F) {
	f.Add([]byte{0, 0, 0x80, 0x7f, 0, 0, 0xc0, 0x7f})
	f.Add(make([]byte, 200))
	f.Fuzz(func(t *testing.T, b []byte) {
		x := make([]float32, len(b)/4)
		for i := range x {
			x[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
		checkScans(t, x)
	})
}

// scans are each scan beside its plain loop.
var scans = []struct {
	name           string
	vectors, plain func([]float32) int
}{
	{"Argmax", Argmax, argmaxPlain},
	{"FirstNonFinite", FirstNonFinite, firstNonFinitePlain},
}

// checkScans fails t where a scan of x and its plain loop disagree.
func checkScans(t *testing.T, x []float32) {
	t.Helper()
	for _, s := range scans {
		if got, want := s.vectors(x), s.plain(x); got != want {
			t.Fatalf("%d values: %s = %d, plain %d (%v)", len(x), s.name, got, want, x)
		}
	}
}

// BenchmarkScans runs each scan over a row of Qwen3's vocabulary, 151,936 logits, on vectors and
// value by value.
func BenchmarkScans(b *testing.B) {
	x := row(151936, 1, nil)
	for _, s := range scans {
		b.Run(s.name+"/vectors", func(b *testing.B) {
			for b.Loop() {
				s.vectors(x)
			}
		})
		b.Run(s.name+"/plain", func(b *testing.B) {
			for b.Loop() {
				s.plain(x)
			}
		})
	}
}
