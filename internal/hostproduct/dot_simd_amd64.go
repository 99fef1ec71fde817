//go:build goexperiment.simd && amd64

package hostproduct

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// haveDot says whether this CPU has AVX512_BF16's VDPBF16PS beside AVX-512 (panel8dpAsm).
var haveDot = haveAVX512 && cpu.X86.HasAVX512BF16

// dotKernels says whether bfloat16 rows are multiplied by bfloat16 panels with VDPBF16PS here
// (productRun.dotRows).
func dotKernels() bool { return haveDot }

//go:noescape
func panel8dpAsm(w unsafe.Pointer, x *[8]unsafe.Pointer, acc unsafe.Pointer, pairs int)

// pairedColumn is the panel column whose sum is a row's output j (j < 64) in panel8dpAsm:
// VPUNPCKLWD and VPUNPCKHWD pair two panel rows' words within each 128-bit lane, so a row's
// first 16 sums are columns 0–3, 8–11, 16–19 and 24–27, its next 16 columns 4–7, 12–15, 20–23
// and 28–31, then the same 32 columns on.
func pairedColumn(j int) int {
	v, i := j/16, j%16
	return 32*(v/2) + 8*(i/4) + 4*(v%2) + i%4
}

// dotColumn maps panel8dpAsm's outputs to the panel's columns (pairedColumn).
var dotColumn = func() (m [kernelWidth]uint8) {
	for j := range m {
		m[j] = uint8(pairedColumn(j))
	}
	return m
}()

// panel8dp writes into y the products of eight bfloat16 rows x (their bits, in values each, in
// even) by one bfloat16 panel w [in, 64] as it is stored (panel8dpAsm: VDPBF16PS, the panel's
// rows paired in registers).
func panel8dp(w []uint16, x *[8][]uint16, y *[8][]float32, in int) {
	pairs := in / 2
	var ptrs [8]unsafe.Pointer
	var acc [8][kernelWidth]float32
	if pairs > 0 {
		_ = w[in*kernelWidth-1]
		for r := range x {
			_ = x[r][in-1]
			ptrs[r] = unsafe.Pointer(&x[r][0])
		}
		panel8dpAsm(unsafe.Pointer(&w[0]), &ptrs, unsafe.Pointer(&acc[0][0]), pairs)
	}
	for r := range y {
		out := y[r][:kernelWidth]
		for j, c := range dotColumn {
			out[c] = acc[r][j]
		}
	}
}
