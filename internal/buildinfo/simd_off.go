//go:build !goexperiment.simd

package buildinfo

// SIMD reports whether this binary was built with GOEXPERIMENT=simd, on any architecture: GoMLX's
// pure-Go matmuls are about 9x slower without it.
const SIMD = false
