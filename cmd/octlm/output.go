package main

import (
	"fmt"
	"io"
)

// errWriter passes writes on and keeps the first error, so a command that prints many lines
// checks once, at the end, that its output arrived (a full disk, a closed pipe).
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	if err != nil {
		e.err = err
	}
	return n, err
}

// check returns the first write error, if any, as the command's error.
func (e *errWriter) check() error {
	if e.err != nil {
		return fmt.Errorf("writing the output: %w", e.err)
	}
	return nil
}

// withOutputCheck runs a command that prints to stdout through an errWriter: the command's
// own error comes first, else a failed write fails the command.
func withOutputCheck(stdout io.Writer, run func(stdout io.Writer) error) error {
	ew := &errWriter{w: stdout}
	if err := run(ew); err != nil {
		return err
	}
	return ew.check()
}
