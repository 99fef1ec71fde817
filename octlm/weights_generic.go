//go:build !goexperiment.simd || !amd64

package octlm

// transpose32 writes the transpose of the rows×cols matrix at src (row stride srcStride) to
// dst (row stride dstStride). This build has no vector path.
func transpose32(dst []float32, dstStride int, src []float32, srcStride, rows, cols int) {
	transposeScalar(dst, dstStride, src, srcStride, rows, cols)
}
