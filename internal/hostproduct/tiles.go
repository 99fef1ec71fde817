package hostproduct

import "unsafe"

// The plain form of the AMX tile kernel (tilesAsm, tiles_linux_amd64.s): what TDPBF16PS computes.

// pairPanelPlain writes the bfloat16 panel w [in, 64] (in a multiple of 32) into dst in the tiles'
// pairs: for each block of 32 k, four tiles of 16 columns, each 16 rows of the block's k pairs
// with the pair's two values side by side for each column (dst [in/32][4][16][16][2]).
func pairPanelPlain(w, dst []uint16, in int) {
	for k := 0; k < in; k += 2 {
		for j := range kernelWidth {
			at := pairedAt(k, j)
			dst[at], dst[at+1] = w[k*kernelWidth+j], w[(k+1)*kernelWidth+j]
		}
	}
}

// pairedAt is where pairPanelPlain puts the panel's value at even k and column j (the value at
// k+1 beside it).
func pairedAt(k, j int) int {
	block, pair := k/tileDepth, (k%tileDepth)/2
	return ((block*tilesWide+j/tileWidth)*tileRows+pair)*2*tileWidth + 2*(j%tileWidth)
}

// tilesPlain writes into y (rows yStride apart) the products of m (≤ 16) bfloat16 rows x (in
// values each, rows in apart) by a panel paired by pairPanel, summed as TDPBF16PS sums: for each
// pair of k, the even product and then the odd one added to the column's float32 sum, each add
// rounded (Intel's pseudocode; the hardware's order within a tile is not specified beyond it).
func tilesPlain(paired, x []uint16, m, in int, y []float32, yStride int) {
	for r := range m {
		row := x[r*in : (r+1)*in]
		out := y[r*yStride : r*yStride+kernelWidth]
		for j := range out {
			var sum float32
			for k := 0; k < in; k += 2 {
				at := pairedAt(k, j)
				sum += widen16(row[k]) * widen16(paired[at])
				sum += widen16(row[k+1]) * widen16(paired[at+1])
			}
			out[j] = sum
		}
	}
}

// tilesPairingPlain is tilesPlain's products by the panel w [in, 64] as it is stored: the plain
// Go that tilesPairing falls back to.
func tilesPairingPlain(w, x []uint16, m, in int, y []float32, yStride int) {
	paired := make([]uint16, in*kernelWidth)
	pairPanelPlain(w, paired, in)
	tilesPlain(paired, x, m, in, y, yStride)
}

// lineAligned is s from its first value on a 64-byte line (s has lineValues more than it needs):
// a tile's rows are loaded a line at a time.
func lineAligned(s []uint16) []uint16 {
	off := uintptr(unsafe.Pointer(unsafe.SliceData(s))) % 64
	return s[(64-off)%64/2:]
}

const (
	lineValues = 32                      // the bfloat16 values in a 64-byte line
	tileRows   = 16                      // a tile's rows: at most 16 rows of x a call
	tileWidth  = 16                      // the float32 sums in a tile's row
	tileDepth  = 32                      // the k a tile of x holds (64 bytes a row)
	tilesWide  = kernelWidth / tileWidth // the output tiles across a panel
)
