//go:build !goexperiment.simd || !amd64

package loader

// widenBF16Vector has no vector path in this build; the caller's scalar loop does all.
func widenBF16Vector(out []uint32, in []uint16) int { return 0 }
