//go:build goexperiment.simd && amd64

package hostproduct

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gomlx/compute/dtypes/bfloat16"
	"github.com/gomlx/compute/dtypes/float16"
)

// keyScorers are the key blocks' dtypes, each with its scores kernel and its keys' values.
var keyScorers = []struct {
	name  string
	score func(q0, q1 []float32, k32 []float32, k16 []uint16, n, m int, s0, s1 []float32)
	store func(x float32) (float32, uint16) // x as stored: its value, and its bits in a 2-byte block
}{
	{"float32", func(q0, q1, k32 []float32, _ []uint16, n, m int, s0, s1 []float32) {
		scoresPair32(q0, q1, k32, n, m, s0, s1)
	},
		func(x float32) (float32, uint16) { return x, 0 }},
	{"float16", func(q0, q1, _ []float32, k16 []uint16, n, m int, s0, s1 []float32) {
		scoresPairHalf(q0, q1, k16, n, m, s0, s1)
	},
		func(x float32) (float32, uint16) { h := float16.FromFloat32(x); return h.Float32(), h.Bits() }},
	{"bfloat16", func(q0, q1, _ []float32, k16 []uint16, n, m int, s0, s1 []float32) {
		scoresPair16(q0, q1, k16, n, m, s0, s1)
	},
		func(x float32) (float32, uint16) { b := bfloat16.FromFloat32(x); return b.Float32(), b.Bits() }},
}

// TestScoresByRows checks the key kernels that walk a block by rows against the strip kernels
// they replace for large blocks: the same bits (each sum over d in the same order), on head
// dimensions of 2 to 256 and attended slots that end inside a strip, at a vector's edge and at
// the block's; and both within float32 rounding of a float64 sum of the keys as stored.
func TestScoresByRows(t *testing.T) {
	if !haveAVX512 {
		t.Skip("no AVX-512 here: the kernels do not run")
	}
	defer func(from int) { rowsFrom = from }(rowsFrom)
	r := rand.New(rand.NewPCG(7, 8))
	for _, ks := range keyScorers {
		for _, hd := range []int{2, 6, 8, 128, 256} {
			for _, n := range []int{16, 64, 128, 512} {
				q0, q1 := make([]float32, hd), make([]float32, hd)
				for i := range q0 {
					q0[i], q1[i] = float32(r.NormFloat64()), float32(r.NormFloat64())
				}
				k32, k16 := make([]float32, hd*n), make([]uint16, hd*n)
				values := make([]float32, hd*n)
				for i := range k32 {
					values[i], k16[i] = ks.store(float32(r.NormFloat64()))
					k32[i] = values[i]
				}
				for _, m := range []int{1, 15, 16, 17, 63, 64, 65, 80, 128, 200, 256, 511, 512} {
					if m > n {
						continue
					}
					name := fmt.Sprintf("%s hd %d n %d m %d", ks.name, hd, n, m)
					score := func(from int) ([]float32, []float32) {
						rowsFrom = from
						s0, s1 := make([]float32, n), make([]float32, n)
						for i := range s0 {
							s0[i], s1[i] = float32(math.NaN()), float32(math.NaN()) // never summed into
						}
						ks.score(q0, q1, k32, k16, n, m, s0, s1)
						return s0[:m], s1[:m]
					}
					rows0, rows1 := score(0)
					strips0, strips1 := score(math.MaxInt)
					for i := range m {
						if math.Float32bits(rows0[i]) != math.Float32bits(strips0[i]) || math.Float32bits(rows1[i]) != math.Float32bits(strips1[i]) {
							t.Fatalf("%s slot %d: by rows %v, %v; by strips %v, %v", name, i, rows0[i], rows1[i], strips0[i], strips1[i])
						}
						var want0, want1, size float64
						for d := range hd {
							k := float64(values[d*n+i])
							want0 += float64(q0[d]) * k
							want1 += float64(q1[d]) * k
							size += math.Abs(float64(q0[d])*k) + math.Abs(float64(q1[d])*k)
						}
						tol := size * float64(hd) * 0x1p-24
						if math.Abs(float64(rows0[i])-want0) > tol || math.Abs(float64(rows1[i])-want1) > tol {
							t.Fatalf("%s slot %d: %v, %v; want %v, %v", name, i, rows0[i], rows1[i], want0, want1)
						}
					}
				}
			}
		}
	}
}

// BenchmarkKeyWalks scores a depth-4,096 decode step's key blocks of Qwen3-0.6B (28 layers, 8 kv
// heads of 128, 8 blocks of 512 slots each, float16: 235 MB, far past the caches) on one core, by
// strips and by rows, and runs the context over value rows of the same bytes beside them.
func BenchmarkKeyWalks(b *testing.B) {
	if !haveAVX512 {
		b.Skip("no AVX-512 here: the kernels do not run")
	}
	const hd, n, blocks = 128, 512, 28 * 8 * 8
	keys := make([]uint16, blocks*hd*n)
	for i := range keys {
		keys[i] = float16.FromFloat32(float32(i%97) / 97).Bits()
	}
	q0, q1 := make([]float32, hd), make([]float32, hd)
	s0, s1 := make([]float32, n), make([]float32, n)
	c0, c1 := make([]float32, hd), make([]float32, hd)
	defer func(from int) { rowsFrom = from }(rowsFrom)
	for _, walk := range []string{"strips", "rows", "context"} {
		b.Run(walk, func(b *testing.B) {
			rowsFrom = map[string]int{"strips": math.MaxInt, "rows": 0}[walk]
			b.SetBytes(int64(2 * len(keys)))
			for b.Loop() {
				for i := range blocks {
					block := keys[i*hd*n : (i+1)*hd*n]
					if walk == "context" {
						contextPairHalf(s0, s1, block, hd, n, c0, c1)
					} else {
						scoresPairHalf(q0, q1, block, n, n, s0, s1)
					}
				}
			}
		})
	}
}
