//go:build goexperiment.simd

package hostproduct

import (
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/cpu"
)

// tileKernels says whether bfloat16 rows are multiplied by bfloat16 panels on AMX's tiles here
// (productRun.tileRows): a CPU with AMX_TILE and AMX_BF16 beside the VDPBF16PS kernels, and a
// Linux that lets this process use the tiles, asked once, at the first product that could.
var tileKernels = sync.OnceValue(func() bool {
	return haveDot && cpu.X86.HasAMXTile && cpu.X86.HasAMXBF16 && requestTiles() == nil
})

// requestTiles asks Linux for the tiles' state (arch_prctl ARCH_REQ_XCOMP_PERM for
// XFEATURE_XTILEDATA): without it the first tile instruction kills the process.
func requestTiles() error {
	const reqXcompPerm, xtileData = 0x1023, 18
	if _, _, errno := syscall.RawSyscall(syscall.SYS_ARCH_PRCTL, reqXcompPerm, xtileData, 0); errno != 0 {
		return errno
	}
	return nil
}

//go:noescape
func pairPanelAsm(w, dst unsafe.Pointer, blocks int)

//go:noescape
func tilesAsm(cfg *[64]byte, x unsafe.Pointer, xStride int, paired unsafe.Pointer, blocks int, y unsafe.Pointer, yStride int)

//go:noescape
func tilesPairingAsm(cfg *[64]byte, x unsafe.Pointer, xStride int, w unsafe.Pointer, blocks int, y unsafe.Pointer, yStride int, buf unsafe.Pointer)

// tileConfigs holds LDTILECFG's 64 bytes for each count of rows m ≤ 16 (palette 1, every tile
// 64 bytes a row): tmm0–tmm4 (the sums and x) m rows, tmm5–tmm7 (the panel's) 16.
var tileConfigs = func() (c [tileRows + 1][64]byte) {
	for m := range c {
		c[m][0] = 1
		for t := range 8 {
			c[m][16+2*t] = 64
			c[m][48+t] = byte(m)
			if t >= 5 {
				c[m][48+t] = tileRows
			}
		}
	}
	return c
}()

// pairPanel writes the bfloat16 panel w [in, 64] into dst in the tiles' pairs (pairPanelPlain's
// layout; in a multiple of 32, dst in·64 long): in AVX-512 where the tiles run, else in plain Go.
func pairPanel(w, dst []uint16, in int) {
	_, _ = w[in*kernelWidth-1], dst[in*kernelWidth-1]
	if !tileKernels() {
		pairPanelPlain(w, dst, in)
		return
	}
	pairPanelAsm(unsafe.Pointer(&w[0]), unsafe.Pointer(&dst[0]), in/tileDepth)
}

// tiles writes into y (rows yStride apart) the products of m (1–16) bfloat16 rows x (in values
// each, in apart; in a multiple of 32) by a panel paired by pairPanel (tilesAsm: TDPBF16PS), or
// in plain Go where Linux has not let this process use the tiles (tileKernels: a tile
// instruction before that kills the process).
func tiles(paired, x []uint16, m, in int, y []float32, yStride int) {
	_, _, _ = paired[in*kernelWidth-1], x[m*in-1], y[(m-1)*yStride+kernelWidth-1]
	if !tileKernels() {
		tilesPlain(paired, x, m, in, y, yStride)
		return
	}
	tilesAsm(&tileConfigs[m], unsafe.Pointer(&x[0]), 2*in, unsafe.Pointer(&paired[0]), in/tileDepth, unsafe.Pointer(&y[0]), 4*yStride)
}

// tilesPairing is tiles' products by the panel w [in, 64] as it is stored, each block of 32 k
// paired into buf (2,048 values) as it goes (tilesPairingAsm), for rows that fit one tile.
func tilesPairing(w, x []uint16, m, in int, y []float32, yStride int, buf []uint16) {
	_, _, _, _ = w[in*kernelWidth-1], x[m*in-1], y[(m-1)*yStride+kernelWidth-1], buf[tileDepth*kernelWidth-1]
	if !tileKernels() {
		tilesPairingPlain(w, x, m, in, y, yStride)
		return
	}
	tilesPairingAsm(&tileConfigs[m], unsafe.Pointer(&x[0]), 2*in, unsafe.Pointer(&w[0]), in/tileDepth, unsafe.Pointer(&y[0]), 4*yStride, unsafe.Pointer(&buf[0]))
}
