//go:build !goexperiment.simd || !amd64 || !linux

package hostproduct

// tileKernels says whether bfloat16 rows are multiplied on AMX's tiles: not in this build.
var tileKernels = func() bool { return false }

// pairPanel writes a bfloat16 panel in the tiles' pairs (plain Go here).
func pairPanel(w, dst []uint16, in int) { pairPanelPlain(w, dst, in) }

// tiles multiplies bfloat16 rows by a paired panel as TDPBF16PS sums (plain Go here).
func tiles(paired, x []uint16, m, in int, y []float32, yStride int) {
	tilesPlain(paired, x, m, in, y, yStride)
}

// tilesPairing multiplies bfloat16 rows by a panel as it is stored, as TDPBF16PS sums (plain Go
// here).
func tilesPairing(w, x []uint16, m, in int, y []float32, yStride int, buf []uint16) {
	tilesPairingPlain(w, x, m, in, y, yStride)
}
