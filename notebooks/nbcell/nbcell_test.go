package nbcell

import (
	"bytes"
	"errors"
	"testing"
)

// TestMust: nil does nothing; an error is printed and ends the program with status 1.
func TestMust(t *testing.T) {
	var out bytes.Buffer
	code := -1
	oldStderr, oldExit := stderr, exit
	stderr, exit = &out, func(c int) { code = c }
	t.Cleanup(func() { stderr, exit = oldStderr, oldExit })
	Must(nil)
	if code != -1 || out.Len() != 0 {
		t.Fatalf("Must(nil) exited %d, printed %q", code, out.String())
	}
	Must(errors.New("no checkpoint"))
	if code != 1 || out.String() != "no checkpoint\n" {
		t.Fatalf("Must(err) exited %d, printed %q; want 1 and the message", code, out.String())
	}
}
