package hostproduct

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gomlx/compute/dtypes/bfloat16"
)

// TestTileKernels pairs bfloat16 panels for the tiles (pairPanel against pairPanelPlain, to the
// bit) and multiplies 1 to 16 rows by them (tiles: TDPBF16PS where this CPU and Linux allow it;
// tilesPairing, pairing as it goes, to the bit the same), with the outputs' rows further apart
// than a panel: on small integers, where every order of the sums is exact, each column against
// the plain sum; on random values against the sum in float64, within float32 sums' rounding; and
// the columns beside the panel's untouched. Then the same with the tiles refused, through the
// plain Go the kernels fall back to.
func TestTileKernels(t *testing.T) {
	t.Logf("tile kernels: %v", tileKernels())
	granted := tileKernels
	defer func() { tileKernels = granted }()
	for _, plain := range []bool{false, true} { // the tiles where they run, then plain Go
		if plain {
			tileKernels = func() bool { return false }
		}
		testTiles(t, plain)
	}
}

// testTiles is TestTileKernels' cases, run through the tiles or, where plain, their plain Go.
func testTiles(t *testing.T, plain bool) {
	rng := rand.New(rand.NewPCG(5, 6))
	const yStride = 3 * kernelWidth
	for _, in := range []int{32, 64, 96, 1024} {
		for _, m := range []int{1, 7, 8, 13, 16} {
			for _, random := range []bool{false, true} {
				t.Run(fmt.Sprintf("plain=%v/in%d/rows%d/random=%v", plain, in, m, random), func(t *testing.T) {
					value := testValue(rng, random)
					w := testPanel(in, value)
					x := make([]uint16, m*in)
					for i := range x {
						x[i] = uint16(bfloat16.FromFloat32(value(i, 5)))
					}
					paired, want := make([]uint16, len(w)), make([]uint16, len(w))
					pairPanel(w, paired, in)
					pairPanelPlain(w, want, in)
					for i := range want {
						if paired[i] != want[i] {
							t.Fatalf("paired panel, value %d: %#04x, want %#04x", i, paired[i], want[i])
						}
					}
					y := make([]float32, (m-1)*yStride+2*kernelWidth)
					for i := range y {
						y[i] = 99 // stale values the kernel must overwrite, or leave beside the panel
					}
					tiles(paired, x, m, in, y[kernelWidth/2:], yStride)
					pairing := append([]float32(nil), y...)
					tilesPairing(w, x, m, in, pairing[kernelWidth/2:], yStride, make([]uint16, tileDepth*kernelWidth))
					for i := range y {
						if pairing[i] != y[i] {
							t.Fatalf("value %d: pairing as it goes %v, the panel paired first %v", i, pairing[i], y[i])
						}
					}
					for r := range m {
						for j := range kernelWidth {
							exact, size := sumFloat64(in, func(k int) float64 {
								return float64(widen16(w[k*kernelWidth+j])) * float64(widen16(x[r*in+k]))
							})
							got := float64(y[r*yStride+kernelWidth/2+j])
							if random && math.Abs(got-exact) > 1e-6*size || !random && got != exact {
								t.Fatalf("row %d, column %d: %v, want %v", r, j, got, exact)
							}
						}
						for _, j := range []int{r*yStride + kernelWidth/2 - 1, r*yStride + 3*kernelWidth/2} {
							if j < len(y) && y[j] != 99 {
								t.Fatalf("row %d: value %d beside the panel written: %v", r, j, y[j])
							}
						}
					}
				})
			}
		}
	}
}

// BenchmarkTilePanels multiplies BenchmarkDotPanels' rows by its weights on one core, on AMX's
// tiles and by the VDPBF16PS kernel, alternated call by call, on panels the L3 holds, and reports
// each one's GFLOP/s and x_tiles/dot, the first's speed over the second's.
//
//	GOEXPERIMENT=simd go test ./internal/hostproduct -run '^$' -bench TilePanels
func BenchmarkTilePanels(b *testing.B) {
	if !dotKernels() || !tileKernels() {
		b.Skip("no AMX tile kernels on this CPU, Linux or build")
	}
	alternatePanels(b, &tilesOff, "tiles", "dot")
}
