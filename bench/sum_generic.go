//go:build !goexperiment.simd || !amd64

package bench

// sumFloat32 has no vector path in this build.
func sumFloat32(a []float32) float32 { return sumScalar(a) }
