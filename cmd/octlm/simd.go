package main

import (
	"fmt"
	"os"
	"runtime/debug"
	"strings"
)

// warnWithoutSIMD tells the user when the binary was built without GOEXPERIMENT=simd:
// GoMLX's pure-Go matmuls are about 9x slower without it.
func warnWithoutSIMD() {
	if !builtWithSIMD() {
		fmt.Fprintln(os.Stderr, "octlm: warning: built without GOEXPERIMENT=simd; the pure-Go backend runs about 9x slower (rebuild with GOEXPERIMENT=simd go install ./cmd/octlm)")
	}
}

// builtWithSIMD reports whether GOEXPERIMENT=simd was set when this binary was built.
func builtWithSIMD() bool {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range info.Settings {
		if s.Key == "GOEXPERIMENT" {
			for _, e := range strings.Split(s.Value, ",") {
				if e == "simd" {
					return true
				}
			}
		}
	}
	return false
}
