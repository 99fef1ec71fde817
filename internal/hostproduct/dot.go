package hostproduct

// The plain form of the VDPBF16PS kernel (panel8dpAsm, kernels_amd64.s): the arithmetic of one
// VDPBF16PS lane.

// panel8dpPlain writes into y the products of the bfloat16 rows x (their bits, in values each,
// in even) by the bfloat16 panel w [in, 64], summed as VDPBF16PS sums them: for each pair of k
// the odd product first, then the even one, each added in float32.
func panel8dpPlain(w []uint16, x *[8][]uint16, y *[8][]float32, in int) {
	for r := range y {
		out := y[r][:kernelWidth]
		for c := range out {
			var sum float32
			for k := 0; k+1 < in; k += 2 {
				sum += widen16(w[(k+1)*kernelWidth+c]) * widen16(x[r][k+1])
				sum += widen16(w[k*kernelWidth+c]) * widen16(x[r][k])
			}
			out[c] = sum
		}
	}
}
