//go:build !unix

package fileio

import "os"

// openNonBlocking opens path for reading (FIFOs are a Unix matter).
func openNonBlocking(path string) (*os.File, error) { return os.Open(path) }
