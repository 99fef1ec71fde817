package hostproduct

// The plain forms of the VDPBF16PS route's kernels (dot_simd_amd64.go, dot_amd64.s): the panel
// layout they share, and the arithmetic of one VDPBF16PS lane.

// pairedColumn is the panel column whose sums are a row's output j (j < 64) in a panel
// interleaved as pairs: VPUNPCKLWD and VPUNPCKHWD pair the words of each 128-bit lane, so the
// interleaved panel's first 16 words of a pair of rows are columns 0–3, 8–11, 16–19 and 24–27,
// its next 16 columns 4–7, 12–15, 20–23 and 28–31, then the same 32 columns on.
func pairedColumn(j int) int {
	v, i := j/16, j%16
	return 32*(v/2) + 8*(i/4) + 4*(v%2) + i%4
}

// interleavePairsPlain writes the bfloat16 panel w [in, 64] (in even) into dst [in/2 · 64]: word
// j of pair p holds column pairedColumn(j)'s value in row 2p (its low half) and in row 2p+1
// (its high half).
func interleavePairsPlain(dst []uint32, w []uint16, in int) {
	for p := range in / 2 {
		even, odd := w[2*p*kernelWidth:(2*p+1)*kernelWidth], w[(2*p+1)*kernelWidth:(2*p+2)*kernelWidth]
		out := dst[p*kernelWidth : (p+1)*kernelWidth]
		for j := range out {
			c := pairedColumn(j)
			out[j] = uint32(even[c]) | uint32(odd[c])<<16
		}
	}
}

// panel4dpPlain writes into y (up to four rows of 64) the products of the bfloat16 rows x (in
// values each, in even) by a panel interleaved as pairs, as VDPBF16PS sums them: each pair's
// odd product first, then its even one, each added in float32.
func panel4dpPlain(panel []uint32, x [][]uint16, y [][]float32, in int) {
	for r := range y {
		out := y[r][:kernelWidth]
		for j := range out {
			var sum float32
			for p := range in / 2 {
				word := panel[p*kernelWidth+j]
				sum += widen16(uint16(word>>16)) * widen16(x[r][2*p+1])
				sum += widen16(uint16(word)) * widen16(x[r][2*p])
			}
			out[pairedColumn(j)] = sum
		}
	}
}
