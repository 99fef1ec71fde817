//go:build unix

package fileio

import (
	"os"
	"syscall"
)

// openNonBlocking opens path for reading without blocking on a FIFO that has no writer.
func openNonBlocking(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
}
