package fileio

import "io"

// ErrWriter passes writes on to W and keeps the first error, so that code printing many lines
// checks once, at the end, that its output arrived (a full disk, a closed pipe). After an error
// every further write fails with it.
type ErrWriter struct {
	W   io.Writer
	Err error
}

// Write writes p to W unless an earlier write failed.
func (e *ErrWriter) Write(p []byte) (int, error) {
	if e.Err != nil {
		return 0, e.Err
	}
	n, err := e.W.Write(p)
	if err != nil {
		e.Err = err
	}
	return n, err
}
