package loader

import (
	"encoding/binary"
	"math"
	"testing"
)

// TestDecodeBF16 checks the (possibly vectorised) decoder against the definition for every
// bit pattern, at lengths that leave a scalar tail.
func TestDecodeBF16(t *testing.T) {
	for _, n := range []int{0, 1, 7, 31, 32, 33, 1 << 16, 1<<16 + 5} {
		raw := make([]byte, 2*n)
		for i := range n {
			binary.LittleEndian.PutUint16(raw[2*i:], uint16(i*40503))
		}
		out := make([]float32, n)
		decodeBF16(out, raw)
		for i := range n {
			want := math.Float32frombits(uint32(binary.LittleEndian.Uint16(raw[2*i:])) << 16)
			if math.Float32bits(out[i]) != math.Float32bits(want) {
				t.Fatalf("n=%d element %d: %#08x, want %#08x", n, i, math.Float32bits(out[i]), math.Float32bits(want))
			}
		}
	}
}

// BenchmarkDecodeBF16 measures the conversion alone on a cache-resident 1 MiB chunk.
func BenchmarkDecodeBF16(b *testing.B) {
	raw := make([]byte, chunkBytes)
	out := make([]float32, chunkBytes/2)
	b.SetBytes(chunkBytes)
	for b.Loop() {
		decodeBF16(out, raw)
	}
}
