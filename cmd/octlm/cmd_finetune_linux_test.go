package main

import (
	"strings"
	"testing"
)

// TestFinetuneProgressOnATerminal: on a terminal the progress is one line rewritten in place
// (step/total, the smoothed loss, lr, tokens/s, time left), ended before the closing message.
func TestFinetuneProgressOnATerminal(t *testing.T) {
	controller, terminal := openPTY(t)
	cmd := octlmCommand(t, loraFixtureArgs(t.TempDir(), 3)...)
	s := startOnTerminal(t, cmd, controller, terminal)
	text := s.waitClosed(t)
	if !inOrder(text, "\r\x1b[Kstep 1/3  loss ", "\r\x1b[Kstep 2/3", "\r\x1b[Kstep 3/3", "lr 0.001", "tokens/s", "left", "\nwrote ") {
		t.Errorf("no progress line rewritten in place:\n%q", text)
	}
	if strings.Count(text, "step 3/3") != 1 {
		t.Errorf("the last step shown %d times:\n%q", strings.Count(text, "step 3/3"), text)
	}
}
