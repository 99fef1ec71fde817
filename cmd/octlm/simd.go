package main

import (
	"fmt"
	"os"

	"github.com/octlm/octlm/internal/buildinfo"
)

// warnWithoutSIMD tells the user when the binary was built without GOEXPERIMENT=simd:
// GoMLX's pure-Go matmuls are about 9x slower without it.
func warnWithoutSIMD() {
	if !buildinfo.SIMD {
		fmt.Fprintln(os.Stderr, "octlm: warning: built without GOEXPERIMENT=simd; the pure-Go backend runs about 9x slower (rebuild with GOEXPERIMENT=simd go install ./cmd/octlm)")
	}
}
