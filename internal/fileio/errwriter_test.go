package fileio

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
)

// failAfter accepts n writes, then fails every one.
type failAfter struct {
	n   int
	buf bytes.Buffer
}

var errFull = errors.New("disk full")

func (f *failAfter) Write(p []byte) (int, error) {
	if f.n == 0 {
		return 0, errFull
	}
	f.n--
	return f.buf.Write(p)
}

func TestErrWriterKeepsTheFirstError(t *testing.T) {
	dst := &failAfter{n: 2}
	ew := &ErrWriter{W: dst}
	for i := range 5 {
		fmt.Fprintf(ew, "line %d\n", i)
	}
	if !errors.Is(ew.Err, errFull) {
		t.Fatalf("Err = %v, want the write error", ew.Err)
	}
	if got := dst.buf.String(); got != "line 0\nline 1\n" {
		t.Errorf("written %q, want the two lines before the failure", got)
	}
	if dst.n != 0 {
		t.Errorf("writes after the failure reached the writer")
	}
}
