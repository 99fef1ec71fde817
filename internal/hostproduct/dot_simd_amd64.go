//go:build goexperiment.simd && amd64

package hostproduct

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// haveDot says whether this CPU has AVX512_BF16's VDPBF16PS beside AVX-512 (dot_amd64.s).
var haveDot = haveAVX512 && cpu.X86.HasAVX512BF16

// dotKernels says whether a prompt's bfloat16 rows are multiplied by bfloat16 panels with
// VDPBF16PS here (productRun.dotPanels).
func dotKernels() bool { return haveDot }

//go:noescape
func interleavePairsAsm(dst, src unsafe.Pointer, pairs int)

//go:noescape
func panel4dpAsm(w unsafe.Pointer, x *[4]unsafe.Pointer, acc unsafe.Pointer, pairs int)

// interleavePairs writes the bfloat16 panel w [in, 64] (in even) into dst [in/2 · 64] as pairs
// of rows (interleavePairsAsm).
func interleavePairs(dst []uint32, w []uint16, in int) {
	pairs := in / 2
	if pairs == 0 {
		return
	}
	_, _ = dst[pairs*kernelWidth-1], w[in*kernelWidth-1]
	interleavePairsAsm(unsafe.Pointer(&dst[0]), unsafe.Pointer(&w[0]), pairs)
}

// dotColumn maps the kernel's outputs to the panel's columns: VPUNPCKLWD and VPUNPCKHWD pair
// the words of each 128-bit lane, so a row's first vector holds columns 0–3, 8–11, 16–19 and
// 24–27, its second 4–7, 12–15, 20–23 and 28–31, the next two the same 32 on.
var dotColumn = func() (m [kernelWidth]uint8) {
	for j := range m {
		m[j] = uint8(pairedColumn(j))
	}
	return m
}()

// panel4dp writes into y (up to four rows of 64) the products of the bfloat16 rows x (their
// bits, in values each, in even) by one panel interleaved as pairs (interleavePairs).
func panel4dp(panel []uint32, x [][]uint16, y [][]float32, in int) {
	pairs := in / 2
	var ptrs [4]unsafe.Pointer
	var acc [4][kernelWidth]float32
	if pairs > 0 {
		_ = panel[pairs*kernelWidth-1]
		for r := range ptrs {
			row := x[min(r, len(x)-1)] // rows past len(x) repeat the last, their sums unused
			_ = row[in-1]
			ptrs[r] = unsafe.Pointer(&row[0])
		}
		panel4dpAsm(unsafe.Pointer(&panel[0]), &ptrs, unsafe.Pointer(&acc[0][0]), pairs)
	}
	for r := range y {
		out := y[r][:kernelWidth]
		for j, c := range dotColumn {
			out[c] = acc[r][j]
		}
	}
}
