package main

import (
	"fmt"
	"io"

	"github.com/octlm/octlm/internal/fileio"
)

// errWriter is fileio.ErrWriter with the command's error message.
type errWriter struct{ fileio.ErrWriter }

// check returns the first write error, if any, as the command's error.
func (e *errWriter) check() error {
	if e.Err != nil {
		return fmt.Errorf("writing the output: %w", e.Err)
	}
	return nil
}

// withOutputCheck runs a command that prints to stdout through an errWriter: the command's
// own error comes first, else a failed write fails the command.
func withOutputCheck(stdout io.Writer, run func(stdout io.Writer) error) error {
	ew := &errWriter{fileio.ErrWriter{W: stdout}}
	if err := run(ew); err != nil {
		return err
	}
	return ew.check()
}
